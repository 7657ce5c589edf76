"""What a queue does with a failure: the UMD's exception for a KMD error (kmd_errors.py),
the API call that recorded the packet a GPU error names (faults.py), and the failed jobs no
wait has raised yet, each raised once (failed_jobs.py). The exceptions themselves are
umd/errors.py.
"""
