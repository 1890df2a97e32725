"""`trl-ext compare`: train several recipes x seeds on one task and budget; table and plot (see trl_ext.compare)."""

from __future__ import annotations

import argparse
from typing import Any

from trl_ext.compare import compare_from_args


def run(args: argparse.Namespace) -> dict[str, Any]:
    return compare_from_args(args)
