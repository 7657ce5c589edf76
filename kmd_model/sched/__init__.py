"""Submission: drm_sched's schedulers (one per ring), amdgpu's rings and their fence drivers.

scheduler (entities, run queues; run_job / free_job and the reset steps), job (jobs and
their dependencies), ring (the gfx ring and the CP's second queue: amdgpu_ring's emit
functions), sdma_ring (the copy engine's ring, sdma_v4_0's functions), fence (32-bit seqnos
compared wrap-safely).
"""
