"""Every example recipe YAML parses into its recipe's Config (with TRL's TrlParser, as the CLI does)."""

import re
from pathlib import Path

import pytest
from trl import ModelConfig, TrlParser

from trl_ext.cli import RECIPES, ScriptArguments, recipe_classes, resolve_reward

RECIPE_DIR = Path(__file__).resolve().parent.parent / "examples" / "recipes"


def test_every_recipe_has_an_example():
    assert sorted(path.stem for path in RECIPE_DIR.glob("*.yaml")) == sorted(set(RECIPES) - {"grpo"})


@pytest.mark.parametrize("path", sorted(RECIPE_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_recipe_yaml_parses_into_its_config(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    config_cls, _ = recipe_classes(path.stem)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig))
    # use_cpu: the recipes ask for bf16, which TrainingArguments refuses on a machine without a GPU otherwise
    script_args, args, model_args = parser.parse_args_and_config(["--config", str(path), "--use_cpu", "True"])
    assert type(args) is config_cls and model_args.model_name_or_path and script_args.dataset_name
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert header and any("Scaled" in line for line in header)  # cites the paper values kept and what was scaled


def _parse(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    config_cls, _ = recipe_classes(path.stem)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig))
    return parser.parse_args_and_config(["--config", str(path), "--use_cpu", "True"])


RL_RECIPES = sorted(p for p in RECIPE_DIR.glob("*.yaml") if p.stem not in ("dpo", "reward"))


@pytest.mark.parametrize("path", RL_RECIPES, ids=lambda p: p.stem)
def test_header_numbers_follow_from_the_config(path, monkeypatch):
    """'on P processes: P x B x A [/ G] = N ...' and 'S / A = K update(s) per rollout' hold for the parsed fields."""
    _, args, _ = _parse(path, monkeypatch)
    header = " ".join(line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#"))
    batch = re.search(r"on (\d+) processes: (\d+) x (\d+) x (\d+)(?: / (\d+))? = (\d+)", header)
    assert batch, "the header states the batch per update"
    stated_processes, processes, per_device, accumulation, divisor, total = (
        int(g) if g else None for g in batch.groups()
    )
    assert stated_processes == processes
    assert (per_device, accumulation) == (args.per_device_train_batch_size, args.gradient_accumulation_steps)
    assert divisor in (None, args.num_generations)
    assert processes * per_device * accumulation == total * (divisor or 1)
    updates = re.search(r"(\d+) / (\d+) = (\d+) updates? per rollout", header)
    assert updates, "the header states the updates per rollout"
    steps, accumulation, stated = map(int, updates.groups())
    assert (steps, accumulation) == (args.steps_per_generation, args.gradient_accumulation_steps)
    assert stated == steps // accumulation * args.num_iterations


@pytest.mark.parametrize("path", RL_RECIPES, ids=lambda p: p.stem)
def test_plateau_trigger_can_fire(path, monkeypatch):
    script_args, args, _ = _parse(path, monkeypatch)
    if args.ref_reset_metric is not None:  # it watches an eval metric: there must be evaluations on held-out data
        assert str(args.eval_strategy.value) != "no" and script_args.dataset_test_split


def test_dapo_recipe_scores_plus_minus_one(monkeypatch):
    script_args, _, _ = _parse(RECIPE_DIR / "dapo.yaml", monkeypatch)
    (reward,) = [resolve_reward(name) for name in script_args.reward_funcs]
    assert (reward.correct_value, reward.wrong_value) == (1.0, -1.0)
