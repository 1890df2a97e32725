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
    trainer.accelerator.end_training()
