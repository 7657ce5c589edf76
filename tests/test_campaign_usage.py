"""The campaigns' command lines (make soak / make mutate / make formal call them): a bad
count, index, share or number of jobs is one usage line naming the option, before anything
is built or run. `--jobs 0` once started `make mutate`'s minute-long baseline and then died
in the thread pool, and `make formal`'s waited for ever; `--streams -5` ran an empty
campaign and reported success."""

from __future__ import annotations

import pytest

from formal.run import main as formal_main
from testbench.difftest.__main__ import main as difftest_main
from testbench.mutate.__main__ import main as mutate_main

CASES = [
    (difftest_main, "python -m testbench.difftest", ["--streams", "-5"], "argument --streams: must be at least 0, not -5"),
    (difftest_main, "python -m testbench.difftest", ["--streams", "0"],
     "--streams 0: nothing to run (give a count, or --multi-streams M for the multi-queue streams alone)"),
    (difftest_main, "python -m testbench.difftest", ["--multi", "--streams", "0"],
     "--streams 0: nothing to run (give a count, or --multi-streams M for the multi-queue streams alone)"),
    (difftest_main, "python -m testbench.difftest", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (difftest_main, "python -m testbench.difftest", ["--replay", "-1"], "argument --replay: must be at least 0, not -1"),
    (difftest_main, "python -m testbench.difftest", ["--list", "-2"], "argument --list: must be at least 0, not -2"),
    (difftest_main, "python -m testbench.difftest", ["--first", "x"], "argument --first: must be an integer, not 'x'"),
    (difftest_main, "python -m testbench.difftest", ["--multi-streams", "-1"],
     "argument --multi-streams: must be at least 0, not -1"),
    (mutate_main, "python -m testbench.mutate", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (mutate_main, "python -m testbench.mutate", ["--budget", "-3"], "argument --budget: must be a positive number, not '-3'"),
    (mutate_main, "python -m testbench.mutate", ["--budget", "inf"], "argument --budget: must be a positive number, not 'inf'"),
    (mutate_main, "python -m testbench.mutate", ["--sample", "x"], "argument --sample: must be a number in (0, 1], not 'x'"),
    (mutate_main, "python -m testbench.mutate", ["--sample", "0"], "argument --sample: must be a number in (0, 1], not '0'"),
    (formal_main, "python -m formal", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (formal_main, "python -m formal", ["--jobs", "two"], "argument --jobs: must be an integer, not 'two'"),
]


@pytest.mark.parametrize("main, prog, argv, message", CASES, ids=[" ".join([c[1].split()[-1]] + c[2]) for c in CASES])
def test_bad_campaign_arguments_are_usage_errors(capsys, main, prog, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"{prog}: error: {message}"


def test_counts_take_the_usual_spellings():
    from testbench.argtypes import int_at_least

    assert int_at_least(0)("0x10") == 16 and int_at_least(1)("7") == 7
