"""Entry point for `accelerate launch scripts/train.py --recipe dapo --config recipe.yaml [flags]`.

The same as `trl-ext <recipe> ...`; accelerate needs a script path, hence this file.
"""

import argparse
import sys

from trl_ext.cli import RECIPES, train

if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--recipe", required=True, choices=sorted(RECIPES))
    known, rest = parser.parse_known_args(sys.argv[1:])
    trainer = train(known.recipe, rest)
    # every rank reaches this point before any tears the process group down: a rank that exits first takes the
    # gloo store with it and a slower rank aborts (SIGABRT) inside destroy_process_group
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()
