"""The recipe registry shared by the command line, the demo and ``trl-ext compare``: name -> (Config, Trainer)."""

from __future__ import annotations

import importlib

# recipe -> (Config, Trainer) names in trl_ext, and whether it takes reward functions
RECIPES: dict[str, tuple[str, str, bool]] = {
    "grpo": ("GRPOConfig", "GRPOTrainer", True),
    "dapo": ("DAPOConfig", "DAPOTrainer", True),
    "dr_grpo": ("DrGRPOConfig", "DrGRPOTrainer", True),
    "rloo": ("RLOOConfig", "RLOOTrainer", True),
    "prorl": ("ProRLConfig", "ProRLTrainer", True),
    "magistral": ("MagistralConfig", "MagistralTrainer", True),
    "ppo": ("PPOConfig", "PPOTrainer", True),
    "dpo": ("DPOConfig", "DPOTrainer", False),
    "reward": ("RewardConfig", "RewardTrainer", False),
}


def recipe_classes(recipe: str) -> tuple[type, type]:
    """(Config class, Trainer class) of a recipe name; SystemExit naming the choices for an unknown one."""
    if recipe not in RECIPES:
        raise SystemExit(f"trl-ext: unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}.")
    trl_ext = importlib.import_module("trl_ext")
    config_name, trainer_name, _ = RECIPES[recipe]
    return getattr(trl_ext, config_name), getattr(trl_ext, trainer_name)
