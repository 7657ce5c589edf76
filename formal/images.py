"""Fixed memory contents for the CP harness (`CPHarness(image=…)`, formal/blocks/cp/env.py: every
read returns these dwords, repeated every len(image) dwords, so a ring or an IB at any
address holds them from that address's offset).

A search in such a memory is a search over timing alone, not over the packets' dwords too:
what needs a whole packet parsed (a failing RELEASE_MEM, a WAIT_REG_MEM's poll, an IB inside
an IB) is found in minutes instead of hours. A trace with this memory is a trace with the
harness's free memory too (which may return these dwords), so a counterexample or a reached
cover found here is one of the group. Built from the packet table (spec/pm4.py)."""

from spec import pm4

FILL = pm4.pad(1)[0]  # the one-dword NOP (a filler)


def _image(*packets: list[int], dwords: int = 16) -> tuple[int, ...]:
    out = [d for p in packets for d in p]
    if len(out) > dwords:
        raise ValueError(f"formal/images.py: {len(out)} dwords of packets in an image of {dwords}")
    return tuple(out + [FILL] * (dwords - len(out)))


FAILING_FENCE = _image(pm4.encode_fields("RELEASE_MEM", {
    "EVENT_TYPE": 0x14, "EVENT_INDEX": 5, "DATA_SEL": 2, "ADDR_LO": 1}))
"""A RELEASE_MEM whose 64-bit fence address (4) is not 8-byte aligned: FENCE_MISALIGNED, checked
in the cycle of its first step (the fence write), then fillers."""

NESTED_IBS = _image(*(pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 4 * (i + 1), "IB_SIZE": 4, "VALID": 1})
                       for i in range(3)))
"""In the ring (dword 0) an IB of the image's next 4 dwords, which are an IB of the 4 after
them, which are an IB too: an IB2 inside the IB1, and an IB inside the IB2, refused (IB_NESTING)."""

POLL = _image(pm4.encode_fields("WAIT_REG_MEM", {
    "FUNCTION": 3, "MEM_SPACE": 1, "ADDR_LO": 16, "REFERENCE": 0, "MASK": 0, "POLL_INTERVAL": 16}))
"""A WAIT_REG_MEM polling memory at byte 64 (EQ 0 under mask 0: met at the first poll), then
fillers, which the ring's fetcher reads ahead while the poll is asked for."""

IB_OF_FILLERS = _image(pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 4, "IB_SIZE": 8, "VALID": 1}))
"""In the ring (dword 0) an IB of 8 fillers (the image's dwords 4 to 11), then fillers: an IB
whose every packet is a boundary, so a queue is preempted inside it as soon as the other has work."""

FILLERS = _image()
"""Fillers alone: every ring packet is one dword, and the only errors are the bus's (a free
RRESP) and the doorbells'."""
