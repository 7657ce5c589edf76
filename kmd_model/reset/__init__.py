"""What goes wrong and how the driver recovers: the CP's error latches decoded into a
sentence (cp_error), the reset ladder with guilt, bans and wedging (recovery), the job
timer that catches a job making no progress (job_timer) and its diagnosis of the poll such
a job is stuck in (stuck).
"""
