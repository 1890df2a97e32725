"""The recipe registry: every recipe trl_ext ships, in one place, read by ``trl_ext.__init__`` (its public names), the
command line (its sub-commands), ``trl-ext demo`` and ``trl-ext compare`` (which recipes they run, with which reward).

Nothing here imports a trainer: the classes are imported on first use (``recipe_classes``), so reading the registry
stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _no_fields(steps: int) -> dict[str, Any]:
    return {}


def _prorl_compare_fields(steps: int) -> dict[str, Any]:
    return {"ref_reset_steps": max(steps // 2, 1)}  # ProRL's reference resets: one halfway through the budget


def _ppo_compare_fields(steps: int) -> dict[str, Any]:
    return {"num_generations": 1}  # GAE needs no groups: one completion per prompt


@dataclass(frozen=True)
class Recipe:
    """One recipe: where its Config and Trainer live, and how the command line, the demo and compare use it."""

    name: str
    module: str  # the trl_ext module defining both classes
    config: str  # class names in that module, exported as trl_ext.<name>
    trainer: str
    takes_rewards: bool = True  # RL recipes take reward functions; DPO and reward modelling take preference data
    in_demo: bool = False  # `trl-ext demo --recipe`
    in_compare: bool = False  # `trl-ext compare --recipes`
    task_reward: str = "trl_ext.rewards:math_accuracy"  # the math reward on the demo/compare task (module:name)
    # The paper's advantage statistics span one optimizer step (Magistral's minibatch standardisation): a rollout is
    # one update, made of gradient-accumulation micro-batches, instead of several updates.
    one_update_per_rollout: bool = False
    trains_critic: bool = False  # PPO: compare hands it its critic (--value_model_name_or_path)
    compare_fields: Callable[[int], dict[str, Any]] = _no_fields  # Config fields compare sets, from its step budget

    def classes(self) -> tuple[type, type]:
        module = importlib.import_module(self.module)
        return getattr(module, self.config), getattr(module, self.trainer)

    def update_structure(self, samples_per_update: int, updates_per_rollout: int) -> dict[str, int]:
        """The Config fields that give one process ``samples_per_update`` samples per optimizer step and
        ``updates_per_rollout`` updates per rollout (one update, in as many micro-batches, with
        ``one_update_per_rollout``)."""
        if self.one_update_per_rollout:
            return {
                "per_device_train_batch_size": samples_per_update // updates_per_rollout,
                "gradient_accumulation_steps": updates_per_rollout,
                "steps_per_generation": updates_per_rollout,
            }
        return {
            "per_device_train_batch_size": samples_per_update,
            "gradient_accumulation_steps": 1,
            "steps_per_generation": updates_per_rollout,
        }


REGISTRY: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("grpo", "trl_ext.trainers.grpo", "GRPOConfig", "GRPOTrainer", in_demo=True, in_compare=True),
        Recipe(
            "dapo",
            "trl_ext.trainers.dapo",
            "DAPOConfig",
            "DAPOTrainer",
            in_demo=True,
            in_compare=True,
            task_reward="trl_ext.trainers.dapo:dapo_math_accuracy",
        ),  # fmt: skip
        Recipe("dr_grpo", "trl_ext.trainers.dr_grpo", "DrGRPOConfig", "DrGRPOTrainer", in_demo=True, in_compare=True),
        Recipe("rloo", "trl_ext.trainers.rloo", "RLOOConfig", "RLOOTrainer", in_demo=True, in_compare=True),
        Recipe(
            "prorl",
            "trl_ext.trainers.prorl",
            "ProRLConfig",
            "ProRLTrainer",
            in_compare=True,
            compare_fields=_prorl_compare_fields,
        ),  # fmt: skip
        Recipe(
            "magistral",
            "trl_ext.trainers.magistral",
            "MagistralConfig",
            "MagistralTrainer",
            in_demo=True,
            in_compare=True,
            one_update_per_rollout=True,
        ),  # fmt: skip
        Recipe(
            "ppo",
            "trl_ext.trainers.ppo",
            "PPOConfig",
            "PPOTrainer",
            in_compare=True,
            trains_critic=True,
            compare_fields=_ppo_compare_fields,
        ),  # fmt: skip
        Recipe("dpo", "trl_ext.trainers.dpo", "DPOConfig", "DPOTrainer", takes_rewards=False),
        Recipe("reward", "trl_ext.trainers.reward", "RewardConfig", "RewardTrainer", takes_rewards=False),
    )
}

# recipe -> (Config, Trainer) names in trl_ext, and whether it takes reward functions (the registry's older form)
RECIPES: dict[str, tuple[str, str, bool]] = {
    name: (recipe.config, recipe.trainer, recipe.takes_rewards) for name, recipe in REGISTRY.items()
}
DEMO_RECIPES = tuple(name for name, recipe in REGISTRY.items() if recipe.in_demo)
COMPARE_RECIPES = tuple(name for name, recipe in REGISTRY.items() if recipe.in_compare)


def public_names() -> dict[str, str]:
    """trl_ext's public class names -> the module that defines each (``trl_ext.__init__`` imports them lazily)."""
    return {name: recipe.module for recipe in REGISTRY.values() for name in (recipe.config, recipe.trainer)}


def get_recipe(recipe: str) -> Recipe:
    """The registry entry of a recipe name; SystemExit naming the choices for an unknown one."""
    if recipe not in REGISTRY:
        raise SystemExit(f"trl-ext: unknown recipe {recipe!r}; choose one of {', '.join(REGISTRY)}.")
    return REGISTRY[recipe]


def recipe_classes(recipe: str) -> tuple[type, type]:
    """(Config class, Trainer class) of a recipe name; SystemExit naming the choices for an unknown one."""
    return get_recipe(recipe).classes()


def task_reward(recipe: str):
    """The math reward a recipe's paper uses on the demo task: ±1 for DAPO, 1 / 0 for the others."""
    module, name = get_recipe(recipe).task_reward.split(":")
    return getattr(importlib.import_module(module), name)
