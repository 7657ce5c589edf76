"""`python -m testbench.bench` (what `make bench` runs)."""

import sys

from . import main

sys.exit(main())
