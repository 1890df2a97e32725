"""`python -m trl_ext.cli ...` (what `trl-ext <recipe> --accelerate_config ...` runs on every process)."""

import sys

from trl_ext.cli import main

sys.exit(main())
