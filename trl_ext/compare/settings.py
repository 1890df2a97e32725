"""What `trl-ext compare` trains, and every check that can fail before anything trains."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl_ext.compare.tasks import TaskSpec
from trl_ext.recipes import COMPARE_RECIPES, RECIPES

DEFAULT_RECIPES = COMPARE_RECIPES
POLICY_CRITIC = "policy"  # --value_model_name_or_path policy: the critic starts from the policy's weights
ACCURACY_KEY = "math_accuracy/correct"  # the share of correct samples, whatever values the recipe's reward gives
SUMMARY_KEYS = ("completions/mean_length", "entropy", "clip_ratio/region_mean", "clip_ratio/low_mean",
                "clip_ratio/high_mean")  # fmt: skip
RESULTS_FILE, TABLE_FILE, PLOT_FILE = "results.json", "comparison.md", "comparison.png"


class CompareError(ValueError):
    """Bad `trl-ext compare` input; the message names the flag."""


@dataclass
class CompareSettings:
    """What `trl-ext compare` trains: recipes x seeds runs of `steps` optimizer steps each."""

    recipes: tuple[str, ...] = DEFAULT_RECIPES
    seeds: int = 3
    steps: int = 120
    output_dir: str = "trl_ext_compare"
    model_name_or_path: str | None = None  # None: the demo's warm-started tiny policy
    dataset_name: str | None = None  # None: the demo's arithmetic task
    value_model_name_or_path: str | None = None  # PPO's critic; "policy" starts it from the policy (the demo default)
    warmup_steps: int = 140  # SFT warm-up of the tiny policy (demo task only)
    threshold: float = 0.6  # accuracy whose first crossing is reported in samples and seconds
    updates_per_rollout: int = 2
    prompts_per_update: int = 4
    num_generations: int = 8
    max_completion_length: int = 8
    learning_rate: float = 1e-3
    show_progress: bool = True
    cards_dir: str | None = None  # write seed 0's model card of each recipe into cards_dir/<recipe>/
    extra_config: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-recipe Config overrides
    task: TaskSpec = field(default_factory=TaskSpec)  # the built-in task (trl_ext.compare.tasks): demo or mixed
    shared_warm_start: bool = False  # every seed starts from seed 0's warm start (default: one warm start per seed)
    eval_every: int = 0  # held-out accuracy every N optimizer steps on the built-in tasks (0: only at the end)


def parse_recipes(text: str) -> tuple[str, ...]:
    """`grpo,dapo` -> ("grpo", "dapo"); a CompareError naming --recipes for an unknown or non-RL recipe."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise CompareError("--recipes is empty; give a comma-separated list such as grpo,dapo.")
    for name in names:
        if name not in COMPARE_RECIPES:
            kind = "is not an RL recipe" if name in RECIPES else "is not a recipe"
            raise CompareError(f"--recipes: {name!r} {kind}; choose from {', '.join(COMPARE_RECIPES)}.")
    if len(set(names)) != len(names):
        raise CompareError(f"--recipes names a recipe twice: {text!r}.")
    return names


def validate(settings: CompareSettings) -> None:
    """Every check that can fail before anything trains, each naming its flag."""
    from trl_ext.recipes import get_recipe

    for name in settings.recipes:
        parse_recipes(name)
    if settings.eval_every < 0:
        raise CompareError(
            f"--eval_every is a number of optimizer steps (0: only at the end), got {settings.eval_every}."
        )
    for flag in ("seeds", "steps", "updates_per_rollout", "prompts_per_update"):
        if getattr(settings, flag) < 1:
            raise CompareError(f"--{flag} must be >= 1, got {getattr(settings, flag)}.")
    if settings.num_generations < 2:
        raise CompareError(f"--num_generations must be >= 2 (group baselines), got {settings.num_generations}.")
    if not 0.0 < settings.threshold <= 1.0:
        raise CompareError(f"--threshold is an accuracy in (0, 1], got {settings.threshold}.")
    try:
        settings.task.check()
    except ValueError as error:
        raise CompareError(f"--{error}") from None
    if (settings.model_name_or_path is None) != (settings.dataset_name is None):
        raise CompareError(
            "--model_name_or_path and --dataset_name go together (a real run); give both, or neither for the "
            "offline demo task."
        )
    critics = [name for name in settings.recipes if get_recipe(name).trains_critic]
    if critics and settings.model_name_or_path and not settings.value_model_name_or_path:
        raise CompareError(
            f"--recipes includes {critics[0]}, which trains a critic: pass --value_model_name_or_path (a reward-model or "
            f"causal-LM path, or '{POLICY_CRITIC}' to start the critic from the policy's weights). On the offline "
            "demo task the critic starts from the tiny policy."
        )
