"""The driver instance (amdgpu_device): kmd (its state, bring-up and self-tests, waits,
interrupts, recovery), clients (files, contexts, BO lifetimes), bind (binding a device,
opening the render node), file (drm_file) and ctx (amdgpu_ctx).
"""
