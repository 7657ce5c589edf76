"""The CP's difftest streams: what a stream is and how each kind is made.

layout (where a stream puts things in GPU memory), stream (the `Stream`: the driver
program plus what the generator knows), gen (valid streams and the `Builder` the others
share), malformed (error classes: the stream's shape and the faults the CP's parser
catches), access_faults (bus errors and VM faults), raw (random dword streams), vm (a
stream's IBs run under a VMID), file (hand-made streams, a pickled list, read back and
checked for --streams-file). A stream is plain data made from (seed, index, caps);
testbench.difftest.campaign says which index is which kind.
"""
