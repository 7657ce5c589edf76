"""The command-stream checker (checker, as i915's command parser), the records of what it
copied (checked: Segment, CheckedJob) and the shadow pool its checked copies live in
(shadow, as amdgpu_sa): the security boundary behind the MMU.
"""
