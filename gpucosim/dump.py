"""Dword dumps: written into crash reports, read back by `gpucosim disasm`.

A dump is text, one line per 8 dwords, each line starting with the byte address of its
first dword; a line `-- dump: NAME --` starts a named dump:

    -- dump: ring [0x0, 0x18) at 0x2001000 --
    0x02001000: c0023f00 02002000 00000000 00800028 c0064900 00000500 02000008 00000000

`parse()` also reads plain hex words (addresses optional, `#` comments), a binary file
of little-endian dwords, and the dumps stored in a `gpucosim run --trace` JSON file.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field

from .inputs import InputError, loads

PER_LINE = 8
ADDR_END = 1 << 64  # no dword of a dump lies past the 64-bit address space


class DumpError(ValueError):
    pass


@dataclass
class Dump:
    name: str
    base: int
    dwords: list[int] = field(default_factory=list)


def n_dwords(n: int) -> str:
    """How a dump's length is said: "1 dword", "5 dwords" (SAID_DWORDS reads it back)."""
    return f"{n} dword" if n == 1 else f"{n} dwords"


def format_dump(name: str, base: int, dwords: list[int]) -> str:
    lines = [f"-- dump: {name} --"]
    for i in range(0, len(dwords), PER_LINE):
        words = " ".join(f"{d:08x}" for d in dwords[i:i + PER_LINE])
        lines.append(f"{base + 4 * i:#010x}: {words}")
    return "\n".join(lines)


_HEADER = re.compile(r"^--\s*dump:\s*(.*?)\s*--\s*$")
SAID_DWORDS = re.compile(r"\((\d+) dwords?\)$")  # ("1 dwords" in reports written before "1 dword")
_ADDR_LINE = re.compile(r"^\s*(0x)?[0-9a-fA-F]+:(\s+(0x)?[0-9a-fA-F]{1,8})+\s*$")


def parse_text(text: str, source: str = "input", base: int = 0) -> list[Dump]:
    """Hex dwords. In a text with `-- dump: NAME --` headers (a crash report), only the
    address lines under each header count; everything else is prose."""
    dumps: list[Dump] = []
    cur: Dump | None = None
    sections = any(_HEADER.match(line.strip()) for line in text.splitlines())
    if not sections and text.startswith("gpucosim crash report"):
        # (the dumps close the report: a copy or a disk that cut it short loses them first)
        raise DumpError(f"{source}: a crash report without its dumps (no `-- dump:` section: cut short?)")
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        mo = _HEADER.match(raw.strip())
        if mo:
            cur = Dump(mo.group(1) or f"dump {len(dumps) + 1}", base)
            dumps.append(cur)
            continue
        if sections and (cur is None or not _ADDR_LINE.match(line)):
            cur = None  # prose between the dumps
            continue
        if not line:
            continue
        for tok in re.split(r"[\s,]+", line):
            if not tok:
                continue
            if tok.endswith(":"):
                try:
                    a = int(tok[:-1], 16)
                except ValueError:
                    raise DumpError(f"{source}:{lineno}: {tok!r} is not an address") from None
                if a >= ADDR_END:
                    raise DumpError(f"{source}:{lineno}: {tok!r} does not fit in 64 bits")
                if cur is None or (cur.dwords and a != cur.base + 4 * len(cur.dwords)):
                    name = cur.name if cur is not None else "dump"
                    cur = Dump(name if not (cur and cur.dwords) else f"{name} @ {a:#x}", a)
                    dumps.append(cur)
                elif not cur.dwords:
                    cur.base = a
                continue
            try:
                v = int(tok, 16)
            except ValueError:
                raise DumpError(f"{source}:{lineno}: {tok!r} is not a hex dword") from None
            if not 0 <= v <= 0xFFFF_FFFF:
                raise DumpError(f"{source}:{lineno}: {tok!r} does not fit in 32 bits")
            if sections and len(tok) != 8:  # (format_dump writes 8 digits: fewer are a file cut there)
                raise DumpError(f"{source}:{lineno}: {tok!r} is not a whole dword (8 hex digits): cut short?")
            if cur is None:
                cur = Dump("dump", base)
                dumps.append(cur)
            cur.dwords.append(v)
    for d in dumps:  # a crash report's IB dump says how long it is: a shorter one was cut
        said = SAID_DWORDS.search(d.name)
        if said and int(said.group(1)) != len(d.dwords):
            raise DumpError(f"{source}: dump {d.name!r} has {len(d.dwords)} of its {n_dwords(int(said.group(1)))}: cut short?")
    dumps = [d for d in dumps if d.dwords]
    if not dumps:
        raise DumpError(f"{source}: no dwords found")
    return _within_64_bits(dumps, source)


def _within_64_bits(dumps: list[Dump], source: str) -> list[Dump]:
    for d in dumps:
        if d.base + 4 * len(d.dwords) > ADDR_END:
            raise DumpError(f"{source}: {len(d.dwords)} dwords from {d.base:#x} run past the 64-bit address space")
    return dumps


def parse_trace(data: dict, source: str) -> list[Dump]:
    other = data.get("otherData", {}) if isinstance(data, dict) else {}
    raw = other.get("dumps") if isinstance(other, dict) else None
    if not raw:
        raise DumpError(f"{source}: a JSON file without gpucosim dumps (write one with "
                        f"`gpucosim run APP --trace FILE`)")
    if not isinstance(raw, list):
        raise DumpError(f"{source}: otherData.dumps is not a list of dumps")
    dumps = []
    for i, d in enumerate(raw):
        # (as `gpucosim run --trace` writes them: a name, a base address, dwords of 32 bits)
        ok = (isinstance(d, dict) and isinstance(d.get("name"), str) and _u(d.get("base"), 64)
              and isinstance(d.get("dwords"), list) and all(_u(x, 32) for x in d["dwords"]))
        if not ok:
            raise DumpError(f"{source}: dump {i} needs a name, an integer base and a list of 32-bit dwords")
        dumps.append(Dump(d["name"], d["base"], list(d["dwords"])))
    return dumps


def _u(v, bits: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << bits


def _unmarked(data: bytes) -> bytes:
    """Text with a byte-order mark as UTF-8 without it: a dump saved by an editor or a Windows
    shell (PowerShell's `>` writes UTF-16) was read as binary dwords ("66 bytes is not a
    whole number of dwords") or its first word as '\ufeffc0033700'. Bytes that only begin
    like a mark, a binary dump's, are left as they are."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                return data
            printable = all(c.isprintable() or c in "\t\r\n" for c in text)
            return text.encode("utf-8") if printable else data
    return data


# Files a newcomer gives by mistake, by their first bytes: each was listed as dwords, a screen
# of "BAD TYPE" lines and exit status 0 (a picture `gpucosim plot` wrote, a waveform, an archive)
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "a PNG picture"), (b"%PDF-", "a PDF document"), (b"\xff\xd8\xff", "a JPEG picture"),
          (b"\x1f\x8b\x08", "a gzip archive"), (b"PK\x03\x04", "a zip archive"), (b"\x7fELF", "an ELF program"),
          (b"\x80\x04\x95", "a Python pickle"), (b"\x80\x05\x95", "a Python pickle"))


def _known_format(data: bytes) -> str | None:
    return next((kind for magic, kind in _MAGIC if data.startswith(magic)), None)


def parse(data: bytes, source: str = "input", base: int = 0) -> list[Dump]:
    """Whatever `source` holds: text dump, trace JSON, or binary little-endian dwords."""
    data = _unmarked(data)
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            obj = loads(data, source)
        except InputError as e:
            raise DumpError(str(e)) from None
        except json.JSONDecodeError as e:
            # text that opens like JSON is no hex dump: a trace cut short, most likely
            raise DumpError(f"{source} is not a JSON trace (line {e.lineno}, column {e.colno}: {e.msg})") from None
        except (ValueError, UnicodeDecodeError):
            obj = None  # not text: little-endian dwords whose first byte is '{' or '['
        if obj is not None:
            return parse_trace(obj, source)
    try:
        text = data.decode("utf-8")
        binary = "\x00" in text
    except UnicodeDecodeError:
        binary = True
    if binary:
        if kind := _known_format(data):
            raise DumpError(f"{source} is {kind}, not a dword dump (give a dump, a crash report or a "
                            "`gpucosim run --trace` file)")
        if len(data) % 4:
            raise DumpError(f"{source}: {len(data)} bytes is not a whole number of dwords")
        if not data:
            raise DumpError(f"{source}: no dwords found")
        words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
        return _within_64_bits([Dump(source, base, words)], source)
    return parse_text(text, source, base)
