"""What the CS checker hands on (kmd_model/cs/checker.py): the shadow copy of each IB a job
reaches (Segment) and the job they make up (CheckedJob), which the CS ioctl places in the
shadow pool and the job keeps (Job.checked) until its fence signals. Apart from the checks:
the rest of the KMD (core/clients.py, the scheduler's jobs) holds these records and uses
none of the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class Segment:
    """The shadow copy of one client IB, run at one level."""

    client: int  # the client's IB address
    size_dw: int
    level: int
    words: np.ndarray | None = None  # the copy (uint32), with its IB packets re-pointed once placed
    links: list = field(default_factory=list)  # (dword index of IB_BASE_LO in words, target Segment)
    runs: int = 0  # dwords the CP runs from here to the end of this IB's chain, nested IBs included
    offset: int = -1  # byte offset in the job's shadow image
    chain_at: int = -1  # dword index of the header of the CHAIN that ends it, if any
    done: bool = False  # checked, and `runs` known

    @property
    def key(self) -> tuple[int, int, int]:
        return self.client, self.size_dw, self.level


@dataclass
class CheckedJob:
    """What a successful check found and copied."""

    chunks: list[Segment]  # one per IB chunk, in order
    segments: list[Segment]  # every distinct copy
    dwords: int = 0  # dwords the CP will run (every IB each time it runs)
    packets: int = 0
    shadow_bytes: int = 0  # the shadow image's size
    shadow_addr: int = 0  # where the job sees the image (its VA, place())
    shadow_mem: int = 0  # where the image is in memory: the shadow pool's range to free

    def client_addr(self, addr: int) -> int:
        """The client address of a byte of the shadow image (an error address), or `addr`."""
        off = addr - self.shadow_addr
        for s in self.segments:
            if 0 <= off - s.offset < 4 * s.size_dw:
                return s.client + off - s.offset
        return addr
