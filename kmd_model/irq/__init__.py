"""How the driver hears from the hardware: the IH ring (ih, amdgpu_ih), the interrupt handler
with its per-source handlers, the fallback poll and the waits built on them (handler).
"""
