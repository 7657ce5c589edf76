"""Memory: buffer objects and the heaps under them (bo), their CPU mappings (mapping,
GEM_MMAP), each file's GPU address space with its page tables (vm, amdgpu_vm) and the
VMIDs its jobs run with (vmid, amdgpu_vmid).
"""
