"""`trl-ext demo`: the offline demo (see trl_ext.demo)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> None:
    from trl_ext.demo import run_demo

    run_demo(recipe=args.recipe, output_dir=args.output_dir, warmup_steps=args.warmup_steps, steps=args.steps)
