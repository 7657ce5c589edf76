"""A long timeline is said before it is written: a million events take some 2 minutes to
write, and after a long run's ^C (its exit report printed) nothing was said in that time,
so that the run looked hung and a second ^C, to end it, lost the timeline."""

from __future__ import annotations


def test_a_long_timeline_is_said_before_it_is_written(tmp_path, monkeypatch, capsys):
    from gpucosim import cli
    from gpucosim.run import session

    monkeypatch.setattr(session, "SLOW_TIMELINE_EVENTS", 10, raising=False)
    out = tmp_path / "h.json"
    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--trace", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    writing = [i for i, ln in enumerate(err) if ln.startswith("gpucosim: writing the timeline to ")]
    written = [i for i, ln in enumerate(err) if ln.startswith("gpucosim: timeline written to ")]
    assert len(writing) == 1 and len(written) == 1 and writing[0] < written[0], err
    assert err[writing[0]].endswith(" events: this takes a while)") and str(out) in err[writing[0]], err


def test_a_short_timeline_is_only_said_written(tmp_path, capsys):
    from gpucosim import cli

    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--trace", str(tmp_path / "h.json")]) == 0
    err = capsys.readouterr().err
    assert "timeline written to" in err and "writing the timeline" not in err
