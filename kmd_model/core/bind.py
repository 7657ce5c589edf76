"""Binding the driver to a device and opening it (amdgpu_drv's probe and remove; the render
node): one driver per device, `bind(dev)` probes and initialises it, `open_render_node()`
opens it as opening /dev/dri/renderD128 does, `rebind(...)` reloads it with new
parameters as `modprobe -r amdgpu; modprobe amdgpu param=...` does.
"""

from __future__ import annotations

import difflib
import errno
from dataclasses import fields

from ..device import Device
from ..uapi import KmdError
from .file import File
from .kmd import Kmd, KmdParams


def params_from(kw: dict) -> KmdParams:
    names = {f.name for f in fields(KmdParams)}
    bad = sorted(set(kw) - names)
    if bad:  # (the one meant first, as gpucosim run --kmd says it: job_timout was 24 names to read through)
        like = difflib.get_close_matches(bad[0], sorted(names), n=1)
        raise TypeError(f"unknown KMD parameter(s) {', '.join(bad)}" + (f": did you mean {like[0]}?" if like else "")
                        + f"; known: {', '.join(sorted(names))}")
    return KmdParams(**kw)


# The bound device, as a render node exists once a driver has bound a GPU.
_bound: Kmd | None = None

# Who owns the binding (`claim`): `gpucosim run` binds its backend's device and runs the
# app on it; another device bound meanwhile would take the app's work off that backend.
_claimed_by: str | None = None
_claimed_dev: Device | None = None


def claim(owner: str | None) -> None:
    """While `owner` (a description: "gpucosim run --sim verilator") holds the binding,
    `bind()` takes only the device bound now (a reload, as `rebind` does); None releases it.
    An app run by `gpucosim run` that binds RefModel() itself, as a script of its own does
    (docs/tutorial.md's paste line, copied into main()), ran on that model instead of the
    RTL, silently: its output said "on model", the exit report and the timeline the RTL's
    bring-up alone."""
    global _claimed_by, _claimed_dev
    _claimed_by, _claimed_dev = owner, (bound().dev if owner is not None else None)


def claimed_by() -> str | None:
    """Who holds the binding (`claim`), or None: the UMD's excepthook for a script run by
    python stays out of a `gpucosim run`, which prints the app's exceptions itself."""
    return _claimed_by


# What the driver calls on a device (kmd_model.device.Device's abstract methods): checked
# by name, not by class, so a stand-in that has them all still binds.
_DEVICE_CALLS = ("mmio_read32", "mmio_write32", "wait_irq", "now", "delay")


def _check_device(dev) -> None:
    """A device bind can take, or a TypeError saying what it takes: the tutorial's paste
    line binds RefModel(), and the class itself (or None, or a backend's name) failed deep
    in the bring-up, with an error about mmio_read32's arguments."""
    if isinstance(dev, type):
        name = dev.__name__
        raise TypeError(f"bind: give a device, {name}(), not the class {name} (docs/tutorial.md: "
                        f"kmd_model.bind(RefModel()))")
    if not all(callable(getattr(dev, c, None)) for c in _DEVICE_CALLS) or not hasattr(dev, "mem"):
        shown = repr(dev) if dev is None or isinstance(dev, (str, int, float, bytes)) else type(dev).__name__
        raise TypeError(f"bind: give a device (a kmd_model.device.Device such as RefModel()), not {shown}")


def bind(dev: Device, params: KmdParams | None = None, *, observers=(), **kw) -> Kmd:
    """Probe and initialise `dev`; later `open_render_node()` calls open this device.
    Keyword arguments are KmdParams fields: `bind(dev, initial_seq=2**32 - 500)`;
    `observers` see the driver's events from bring-up on (Kmd.notify). The driver bound
    before goes, its files closed (Kmd.detach): before the bring-up when it is `dev`'s
    (which it resets), after it when it is another device's. A bring-up that fails is
    the KmdError that says whether a driver is still bound."""
    global _bound
    _check_device(dev)
    if params is not None and kw:
        raise TypeError("bind: give either params or keyword parameters, not both")
    if isinstance(params, dict):  # (`bind(RefModel(), {"cap_sys_nice": True})`: an AttributeError inside the driver)
        raise TypeError("bind: params is a KmdParams, not a dict: give its items as keywords, "
                        "bind(dev, **params), or KmdParams(**params)")
    if params is not None and not isinstance(params, KmdParams):
        shown = repr(params) if isinstance(params, (str, int, float, bytes)) else type(params).__name__
        raise TypeError(f"bind: params must be a KmdParams (or give keyword parameters: bind(dev, cs_check=False)), "
                        f"not {shown}")
    params = params or params_from(kw)
    if _claimed_by is not None and dev is not _claimed_dev:
        raise KmdError(errno.EBUSY, f"bind: {_claimed_by} has bound the driver to its own device: the app opens "
                                    "it with umd.open() alone (kmd_model.bind(RefModel()) is for a script run by "
                                    "itself, under `if __name__ == \"__main__\":`, as examples/hello.py does; a "
                                    "script without a main(), which gpucosim runs as __main__, binds only when "
                                    "kmd_model.bound() raises KmdError, as examples/demo.py does)")
    old = _bound
    if old is not None and old.dev is dev:
        # one driver per device: the old one's files would keep BOs in memory the new one
        # hands out again, and wait for jobs its rings no longer run. Gone before the new
        # one resets the hardware, so a bring-up that fails leaves no driver bound.
        _bound = None
        old.detach()
    try:
        kmd = Kmd(dev, params, observers)
    except KmdError as e:  # the bring-up failed: say what is bound now
        if old is not None:
            e.message += (": no driver is bound now (the device's old driver was unloaded first): bind again"
                          if _bound is None else ": the driver bound before is still bound, its device untouched")
            e.args = (e.errno, e.message)
        raise
    if _bound is not None:
        # another device: the one render node is the new device's now. The old driver's
        # Devices are lost (DeviceLost at their next call), as at an unbind: they went on
        # working on a driver that was no longer the bound one, which the exit report,
        # the trace and a new umd.open() did not see.
        _bound.detach("its device's driver was unbound (another device was bound)")
    _bound = kmd
    return kmd


def rebind(**kw) -> Kmd:
    """Reload the driver on the bound device with new parameters, as `modprobe -r amdgpu;
    modprobe amdgpu param=...` does: open files are closed, the hardware is brought up
    again. Observers and trace hooks stay (they are told with a "bind" event)."""
    old = bound()
    # (checked before the old driver goes: a mistyped or out-of-range parameter unbound it and
    # then failed, leaving no driver bound and every open Device lost, as `modprobe` checks
    # its parameters before it loads anything)
    params = params_from(kw)
    observers, hooks = list(old.observers), list(old.trace_hooks)
    unbind()
    kmd = bind(old.dev, params, observers=observers)
    kmd.trace_hooks[:0] = hooks
    if kmd.observers:
        kmd.notify("bind", kmd=kmd)
    return kmd


def unbind() -> None:
    global _bound
    if _bound is not None:
        for f in list(_bound.files.values()):
            f.close()
    _bound = None


def bound() -> Kmd:
    if _bound is None:
        raise KmdError(errno.ENODEV, "no device bound: call kmd_model.bind(dev) first")
    return _bound


def open_render_node(*, cap_sys_nice: bool | None = None, cap_perfmon: bool | None = None) -> File:
    """Open the bound device, as opening /dev/dri/renderD128 does. `cap_sys_nice`: whether
    the opening process has CAP_SYS_NICE, which CTX ALLOC's HIGH and VERY_HIGH priorities
    need; `cap_perfmon`: whether it has CAP_PERFMON, which INFO COUNTERS' device-wide
    counters need (None: the driver's KmdParams.cap_sys_nice and KmdParams.cap_perfmon,
    False unless bound otherwise)."""
    for name, v in (("cap_sys_nice", cap_sys_nice), ("cap_perfmon", cap_perfmon)):
        if v is not None and type(v) is not bool:  # (isinstance runs a __class__ of the caller's)
            raise TypeError(f"open_render_node: {name} must be True, False or None, not {v!r}")
    if _bound is None:  # (named "open" first, as every other refusal of the open and of each ioctl)
        raise KmdError(errno.ENODEV, "open: no device bound: call kmd_model.bind(dev) first")
    return _bound.open(cap_sys_nice, cap_perfmon)
