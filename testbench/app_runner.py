"""cocotb side of the launcher: run one app against the RTL.

testbench/run.py starts the simulator with this module as the cocotb test and the app
named in $GPUCOSIM_APP; the app's main() runs in a bridge thread on a CocotbDevice that
the KMD has been bound to. Its exit code goes to $GPUCOSIM_APP_RESULT for the launcher.
"""

import os

import cocotb

from testbench.cocotb_device import run_driver


def load_main(target: str):
    """`pkg.module` or `pkg.module:function` or a path to a .py file → its main function."""
    import importlib
    import importlib.util

    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location("gpucosim_app", target)
        if spec is None or spec.loader is None:
            raise FileNotFoundError(f"cannot load app {target!r}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        func = "main"
    else:
        name, _, func = target.partition(":")
        mod = importlib.import_module(name)
        func = func or "main"
    main = getattr(mod, func, None)
    if not callable(main):
        raise AttributeError(f"app {target!r} has no callable {func}()")
    return main


def run_bound(dev, main) -> int:
    """Bind the KMD to `dev`, run the app, unbind; the app's exit code (None → 0)."""
    import kmd_model

    kmd_model.bind(dev)
    try:
        code = main()
    finally:
        kmd_model.unbind()
    return 0 if code is None else int(code)


@cocotb.test()
async def app(dut):
    main = load_main(os.environ["GPUCOSIM_APP"])
    code = await run_driver(dut, lambda dev: run_bound(dev, main))
    result = os.environ.get("GPUCOSIM_APP_RESULT")
    if result:
        with open(result, "w") as f:
            f.write(str(code))
    assert code == 0, f"app exited with {code}"
