"""Running a range of streams on a simulator: one or more simulator processes, each
running tests/difftest/cocotb_difftest.py (testbench/difftest/simulator/rtl.py) over a contiguous range of
indices and writing one JSON line per stream, which is read back here (and polled for
the progress bar). A stream a simulator never finished becomes a failed record naming it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

from ..streams.gen import Caps
from . import prefetch

SPEED = {"verilator": 4.0, "icarus": 1.0}  # relative streams/s, to split a campaign across simulators


def split(first: int, count: int, parts: int) -> list[tuple[int, int]]:
    """`count` indices from `first` in `parts` contiguous (first, count) chunks."""
    parts = max(1, min(parts, count))
    out, at = [], first
    for k in range(parts):
        n = count // parts + (k < count % parts)
        out.append((at, n))
        at += n
    return out


def split_sims(sims: list[str], first: int, count: int) -> list[tuple[str, int, int]]:
    total = sum(SPEED.get(s, 1.0) for s in sims)
    out, at = [], first
    for k, s in enumerate(sims):
        n = count - (at - first) if k == len(sims) - 1 else round(count * SPEED.get(s, 1.0) / total)
        out.append((s, at, n))
        at += n
    return out


# the cocotb module that runs each family of streams (tests/*/cocotb_*.py)
FAMILIES = {"cp": "tests.difftest.cocotb_difftest", "multi": "tests.difftest.cocotb_multi_difftest"}


def run_rtl(simulator: str, seed: int, first: int, count: int, *, jobs: int = 1, step: bool = False,
            data_width: int = 64, report_file: Path | None = None, progress=None,
            workdir: Path | None = None, streams_file: Path | None = None,
            clock: str | None = None, family: str = "cp") -> tuple[list[dict], float, list[str]]:
    """Run indices [first, first + count) of `family` ("cp": the CP campaign, "multi":
    testbench/difftest/multi/) on `simulator` in `jobs` simulator processes.
    Returns (records, seconds, problems); a stream the simulator never finished becomes a
    failed record naming it. `clock` overrides $GPUCOSIM_CLOCK (testbench.sim.build).
    `streams_file`: run its streams instead (testbench/difftest/streams/file.py; raises
    StreamsFileError, before anything is built, when it cannot)."""
    from testbench import sim
    from testbench.sim.design import gpu_design

    given = None
    if streams_file is not None:  # checked first (a StreamsFileError names what is wrong)
        from ..streams import file

        given = file.load(streams_file, family)
    design = gpu_design(data_width)
    sim.build(design, simulator, clock=clock)
    own = workdir is None
    tmp = Path(workdir or tempfile.mkdtemp(prefix=f"difftest-{family}-{simulator}-", dir=sim.BUILD))
    tmp.mkdir(parents=True, exist_ok=True)
    if given is not None:  # the file decides how many streams there are
        import pickle

        # the simulators read this copy of what was checked: the file may change while
        # they start, and an old one names old modules
        first, count = 0, len(given)
        streams_file = tmp / f"{family}-streams.pickle"
        streams_file.write_bytes(pickle.dumps(given))
    chunks = split(first, count, jobs)
    outs = [tmp / f"{simulator}-{k}.jsonl" for k in range(len(chunks))]
    for o in outs:
        o.unlink(missing_ok=True)
    results: list = [None] * len(chunks)
    # generated CP streams are made and run on the model here, ahead of the simulators
    server = prefetch.Server(seed) if family == "cp" and streams_file is None else None

    def work(k: int, a: int, n: int) -> None:
        env = {"DIFFTEST_SEED": str(seed), "DIFFTEST_FIRST": str(a), "DIFFTEST_COUNT": str(n),
               "DIFFTEST_OUT": str(outs[k]), "DIFFTEST_STEP": "1" if step else "0",
               "COCOTB_LOG_LEVEL": "WARNING",
               # pytest's assertion rewriting for the cocotb test module only: by default
               # cocotb has it rewrite every module imported after it (the model, the
               # driver, the generator), 0.5-1 s of each simulator's start
               "COCOTB_REWRITE_ASSERTION_FILES": "cocotb_*.py"}
        if report_file is not None:
            env["DIFFTEST_REPORT"] = str(report_file)
        if streams_file is not None:
            env["DIFFTEST_STREAMS_FILE"] = str(streams_file)
        if server is not None:
            env.update(server.env())
        results[k] = sim.run(design, simulator, FAMILIES[family], tag=f"{family}difftest{k}", extra_env=env,
                             clock=clock)

    def read(path: Path) -> list[dict]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    t0 = time.monotonic()
    threads = [threading.Thread(target=work, args=(k, a, n), daemon=True) for k, (a, n) in enumerate(chunks)]
    try:
        for t in threads:
            t.start()
        while alive := [t for t in threads if t.is_alive()]:
            alive[0].join(0.5)  # (not a sleep: the campaign's time ends when its last simulator does)
            if progress is not None:
                recs = [r for o in outs for r in read(o)]
                progress(len(recs), sum(not r["ok"] for r in recs))
        seconds = time.monotonic() - t0
    finally:
        if server is not None:
            server.close()
    recs, problems = [], []
    for k, (a, n) in enumerate(chunks):
        got = read(outs[k])
        recs += got
        # a file's streams keep their own index (a replayed stream 17 is item 0 of its
        # file): each simulator writes one line per item in order, so count the lines
        done = set(range(a, a + len(got))) if given is not None else {r["index"] for r in got}
        missing = [i for i in range(a, a + n) if i not in done]
        res = results[k]
        if missing:
            i = missing[0]
            why = res.explain()[-1500:] if res is not None else "the simulator did not start"
            problems.append(f"{simulator} stopped at stream {i} ({len(missing)} stream(s) not run): {why}")
            recs.append({"index": i, "sim": simulator, "family": family, "kind": "?", "class": "", "variant": "",
                         "skipped": "",
                         "ok": False, "outcome": "", "rtl_outcome": "crash", "bins": [], "wall": 0,
                         "idle_after": None, "first_packet": "the simulator stopped while running this stream",
                         "diffs": [why.splitlines()[-1] if why else "crash"],
                         "replay": f"python -m testbench.difftest{' --multi' if family == 'multi' else ''} --sim "
                                   f"{simulator} --seed {seed} --replay {i}"})
    if own:
        shutil.rmtree(tmp, ignore_errors=True)
    return recs, seconds, problems


def caps_of(recs: list[dict]) -> Caps | None:
    for r in recs:
        if "caps" in r:
            return Caps(**r["caps"])
    return None
