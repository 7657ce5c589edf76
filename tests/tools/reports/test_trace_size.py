"""A timeline gpucosim writes is one its own tools read: no larger than what `gpucosim plot`
and `disasm` take (gpucosim/inputs.py's MAX_BYTES). Its million events were taken for about
150 MB; they are 220 MB of an RTL run's events and 280 MB of a model run's (a CS slice
carries its IB's listing, a doorbell its ring dwords), and a model run that kept a million
wrote a file both tools refused as "more than a timeline gpucosim writes"."""

from __future__ import annotations

import json

from gpucosim import inputs
from gpucosim.trace import timeline as tl


def test_a_timeline_is_never_larger_than_gpucosims_tools_read(tmp_path, monkeypatch):
    limit = 200_000
    monkeypatch.setattr(tl, "MAX_BYTES", limit, raising=False)  # (the bound the writer keeps to)
    monkeypatch.setattr(inputs, "MAX_BYTES", limit)
    t = tl.Timeline("model")
    for i in range(2000):  # (about 300 bytes each, as a model run's: 600 KB in all)
        t.span("umd", f"Queue.write #{i}", 2 * i, 2 * i + 1, {"args": "x" * 200})
    assert len(t) == 2000 and t.dropped == 0
    path = t.write(tmp_path / "t.json")
    assert path.stat().st_size <= limit
    data = json.loads(inputs.read_bytes(str(path)))  # (it raised InputError: "more than ... MiB")
    kept = [e["name"] for e in data["traceEvents"] if e["ph"] != "M"]
    # the first events, the rest counted as dropped: as past MAX_EVENTS
    assert 0 < len(kept) < 2000 and kept == [f"Queue.write #{i}" for i in range(len(kept))]
    assert t.dropped == 2000 - len(kept) == data["otherData"]["dropped_events"]
    assert len(t) == len(kept)
    # most of the room used: not dropped wholesale
    assert path.stat().st_size > 0.9 * limit


def test_a_timeline_under_the_bound_keeps_every_event(tmp_path):
    t = tl.Timeline("model")
    for i in range(100):
        t.instant("umd", f"e{i}", i, {"args": "y" * 100})
    path = t.write(tmp_path / "t.json")
    data = json.loads(inputs.read_bytes(str(path)))
    assert t.dropped == 0 and "dropped_events" not in data["otherData"]
    assert len([e for e in data["traceEvents"] if e["ph"] != "M"]) == 100
