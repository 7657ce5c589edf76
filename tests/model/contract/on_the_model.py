"""The pytest test that runs a contract module's CHECKS on the reference model: each
`check_*(dev)` on a fresh RefModel, at each of `data_widths` if given (the same bodies run
on the RTL through tests/cosim/driver_checks.py). One definition for the modules split by
concept, which would otherwise each write it again."""

from __future__ import annotations

import pytest


def on_the_model(checks, data_widths=None, name="test_contract_on_the_model"):
    """A test function, to be bound to `name` in the module: test ids "WIDTH-check" (or
    "check" without widths), the check's name without its "check_" prefix."""
    from testbench.refmodel import RefModel

    if data_widths is None:
        def test(check):
            check(RefModel())
    else:
        @pytest.mark.parametrize("data_width", list(data_widths))
        def test(check, data_width):
            check(RefModel(data_width=data_width))
    test.__name__ = test.__qualname__ = name
    return pytest.mark.parametrize("check", checks, ids=lambda c: c.__name__[6:])(test)
