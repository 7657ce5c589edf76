"""How the UMD's messages name a handle: a Buffer by its repr without its state, so that a
freed one reads "<umd.Buffer GTT 0x100000+0x40> was freed", not "<... freed> was freed"."""

from __future__ import annotations


def named(buf) -> str:
    r = repr(buf)
    return r[:-len(" freed>")] + ">" if r.endswith(" freed>") else r
