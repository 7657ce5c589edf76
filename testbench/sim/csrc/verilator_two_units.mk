# Read after Verilator's Vtop.mk by the fast and waves builds (testbench/sim/__init__.py, whose make
# line also sets VK_OBJS to the two objects below): the model's C++ compiled as two files,
# its per-cycle classes at OPT_FAST and its run-once classes at OPT_SLOW, instead of one
# file per class through two precompiled headers. Each 70 MB header cost about 1.6 s of
# CPU to make and every file still paid to load one; Verilator's own one-file build
# (VM_PARALLEL_BUILDS=0) would compile the run-once code at OPT_FAST.
Vtop__fast_all.cpp: $(addsuffix .cpp, $(VM_FAST))
	$(VERILATOR_INCLUDER) -DVL_INCLUDE_OPT=include $^ > $@
Vtop__slow_all.cpp: $(addsuffix .cpp, $(VM_SLOW))
	$(VERILATOR_INCLUDER) -DVL_INCLUDE_OPT=include $^ > $@
Vtop__fast_all.o: Vtop__fast_all.cpp
	$(OBJCACHE) $(CXX) $(OPT_FAST) $(CXXFLAGS) $(CPPFLAGS) -c -o $@ $<
Vtop__slow_all.o: Vtop__slow_all.cpp
	$(OBJCACHE) $(CXX) $(OPT_SLOW) $(CXXFLAGS) $(CPPFLAGS) -c -o $@ $<
