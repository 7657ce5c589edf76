"""A difftest campaign in simulator processes.

runner (in the launching process: splits a range of stream indices over simulator
processes and reads back their JSON lines), rtl (the cocotb side, in each simulator: runs
each stream on the RTL and the model and compares), prefetch (the model's side of each
stream, made ahead in the launcher while the simulator runs).
"""
