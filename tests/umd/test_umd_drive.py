"""Every test in tests/umd that drives the device by hand goes through tests/umd/drive.py's
run_device, which holds the driver's lock as an ioctl does: a `kmd.dev.delay(...)` or
`kmd.service()` of its own would run beside an async queue's submission thread (two tests
raced so, and each grew its own locked copy)."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BY_HAND = re.compile(r"\.dev\.delay\(|\.service\(\)")


def test_the_device_is_driven_by_hand_only_through_run_device():
    mine = ("drive.py", Path(__file__).name)
    found = [f"{p.relative_to(HERE)}:{n}: {line.strip()}"
             for p in sorted(HERE.rglob("*.py")) if p.relative_to(HERE).as_posix() not in mine
             for n, line in enumerate(p.read_text().splitlines(), 1) if BY_HAND.search(line)]
    assert not found, "drive the device through tests/umd/drive.py's run_device:\n" + "\n".join(found)
