"""Hand-written mutants: one textual change to one file of a scratch copy of the tree.

The RTL mutants (rtl.py) and the fast subset (fast.py) are of this kind: a `Patch` names
the file, the exact text it replaces (which must occur exactly once, so a patch whose
code has moved fails loudly instead of testing nothing) and its replacement.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Patch:
    name: str  # short and stable: the report's key
    path: str  # the file, relative to the repository
    before: str  # the exact text replaced (exactly one occurrence)
    after: str
    why: str  # the class of hole this mutant stands for

    @property
    def key(self) -> str:
        return f"{self.path}::{self.name}"

    @property
    def diff(self) -> str:
        return "\n".join([f"-{ln}" for ln in self.before.splitlines()] + [f"+{ln}" for ln in self.after.splitlines()])

    def check(self, root: Path = ROOT) -> str:
        """The file's text, after checking the patch still applies; ValueError if not."""
        text = (root / self.path).read_text()
        n = text.count(self.before)
        if n != 1:
            raise ValueError(f"mutant {self.name}: {self.path} holds its text {n} times, not once: the code "
                             f"changed; update testbench/mutate ({self.before.strip()[:60]!r})")
        return text

    def apply(self, root: Path) -> None:
        text = self.check(root)
        (root / self.path).write_text(text.replace(self.before, self.after))


def tree_files(root: Path = ROOT) -> list[str]:
    """The working tree's files (tracked, and new ones not ignored), as git sees them."""
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                       check=True)
    return [p for p in r.stdout.decode().split("\0") if p and (root / p).is_file()]


def scratch_copy(dst: Path, root: Path = ROOT, only: tuple[str, ...] = ()) -> Path:
    """A copy of the working tree at `dst` (its folders `only`, when given)."""
    if dst.exists():
        shutil.rmtree(dst)
    for rel in tree_files(root):
        if only and not rel.startswith(only):
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, out)
    return dst


def run_pytest(root: Path, args: list[str], timeout: float, env: dict | None = None) -> tuple[int, float, str]:
    """pytest in the scratch copy (its modules shadow the installed tree): (exit code,
    seconds, the tail of the output). A timeout counts as a failure (exit code -9)."""
    e = dict(os.environ)
    e.pop("PYTEST_XDIST_WORKER", None)
    e.pop("PYTEST_ADDOPTS", None)
    e["PYTHONPATH"] = str(root)
    e.update(env or {})
    t0 = time.monotonic()
    try:
        # (without xdist its `xdist_group` marks are unknown: their warnings filled the tail kept below)
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                            "-p", "no:randomly", "-W", "ignore::pytest.PytestUnknownMarkWarning", *args],
                           cwd=root, env=e, capture_output=True, text=True, timeout=timeout)
        code, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as x:
        code, out = -9, f"timed out after {timeout:.0f} s\n{x.stdout or ''}"
    return code, time.monotonic() - t0, "\n".join(out.strip().splitlines()[-15:])
