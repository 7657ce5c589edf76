"""The test thread driving the device as the driver does: under the driver's lock.

A test that lets simulated time pass (`kmd.dev.delay`) or makes the KMD fold in what the
GPU did (`kmd.service()`) from its own thread runs beside every other thread that enters
the driver: an async queue's submission thread in the middle of a CS (counted, its job not
yet pushed), a file's close. An ioctl holds `Kmd.lock` for both, so the test holds it too:
`run_device` is the one way tests/umd drives the device by hand (two tests, each with its
own copy of the lock, were the fix for the race it closes; the others had none).
"""

from __future__ import annotations


def run_device(kmd, cycles: int = 0, rounds: int = 1, service: bool = True) -> None:
    """`rounds` times: let `cycles` simulated cycles pass, then (with `service`) have the KMD
    take in fences, interrupts, errors and timeouts, all under the driver's lock as an
    ioctl does."""
    for _ in range(rounds):
        with kmd.lock:
            if cycles:
                kmd.dev.delay(cycles)
            if service:
                kmd.service()
