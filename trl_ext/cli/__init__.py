"""`trl-ext` console script; its usage text (what `--help` prints first) is `trl_ext.cli.parser.CLI_HELP`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from trl_ext.cli.parser import ScriptArguments, command_parser
from trl_ext.cli.train import resolve_reward, train
from trl_ext.data.loading import DATA_FILE_BUILDERS, load_any_dataset
from trl_ext.recipes import RECIPES, recipe_classes

__all__ = ["DATA_FILE_BUILDERS", "RECIPES", "ScriptArguments", "load_any_dataset", "main", "recipe_classes",
           "resolve_reward", "train"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in RECIPES:
        if "--accelerate_config" in argv:  # launch every process of the run under accelerate
            from trl_ext.cli.launch import launch

            launch(argv[0], argv[1:])
            return 0
        trainer = train(argv[0], argv[1:])
        if trainer.accelerator.num_processes > 1:  # no rank tears the process group down while another works
            trainer.accelerator.wait_for_everyone()
            trainer.accelerator.end_training()
        return 0
    args = command_parser().parse_args(argv)
    _command(args.command)(args)
    return 0


def _command(name: str) -> Callable[[argparse.Namespace], Any]:
    """The ``run`` function of a sub-command's module (imported only when used: each pulls in different libraries)."""
    if name == "demo":
        from trl_ext.cli.demo import run
    elif name == "compare":
        from trl_ext.cli.compare import run
    elif name == "eval":
        from trl_ext.cli.eval import run
    elif name == "push":
        from trl_ext.cli.push import run
    else:
        from trl_ext.cli.serve import run
    return run


if __name__ == "__main__":
    sys.exit(main())
