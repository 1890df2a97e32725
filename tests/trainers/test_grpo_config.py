"""GRPO-family configs: paper defaults, help strings, model-card metadata and validation errors (no model)."""

from __future__ import annotations

import dataclasses

import pytest
import trl

import trl_ext
from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args

RECIPES = {
    "DAPO": (trl_ext.DAPOConfig, trl_ext.DAPOTrainer),
    "DrGRPO": (trl_ext.DrGRPOConfig, trl_ext.DrGRPOTrainer),
    "RLOO": (trl_ext.RLOOConfig, trl_ext.RLOOTrainer),
    "Magistral": (trl_ext.MagistralConfig, trl_ext.MagistralTrainer),
}

# The recipes' paper defaults (docs/paper_audit.md).
EXPECTED = {
    "DAPO": dict(
        advantage_estimator="grpo", epsilon=0.2, epsilon_high=0.28, loss_type="dapo", beta=0.0,
        dynamic_sampling=True, dynamic_sampling_max_rounds=10, mask_truncated_completions=True,
        soft_overlong_punishment=True, overlong_penalty_factor=1.0,
    ),
    "DrGRPO": dict(
        advantage_estimator="dr_grpo", epsilon=0.2, epsilon_high=None, loss_type="dr_grpo", beta=0.0,
        scale_rewards="none", dynamic_sampling=False, soft_overlong_punishment=False,
    ),
    "RLOO": dict(
        advantage_estimator="rloo", epsilon=0.2, epsilon_high=None, loss_type="dapo", beta=0.0,
        dynamic_sampling=False, soft_overlong_punishment=False,
    ),
    "Magistral": dict(
        advantage_estimator="magistral", epsilon=0.2, epsilon_high=0.28, loss_type="dapo", beta=0.0,
        dynamic_sampling=True, soft_overlong_punishment=True, overlong_penalty_factor=0.1,
        mask_truncated_completions=False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_recipe_defaults_follow_the_papers(recipe, tmp_path):
    config_cls, trainer_cls = RECIPES[recipe]
    args = tiny_args(config_cls, str(tmp_path))
    for name, value in EXPECTED[recipe].items():
        assert getattr(args, name) == value, name
    assert trainer_cls.config_class is config_cls
    card = trainer_cls.recipe_card
    assert set(card.paper) == {"title", "id", "citation"}
    assert card.paper["id"] in card.paper["citation"]
    assert card.paper["citation"].lstrip().startswith("@")
    assert "trl-ext" in card.tags and card.name
    assert "TRL" in config_cls.__doc__  # says how it differs from TRL's nearest option


def test_extended_grpo_defaults_are_stock(tmp_path):
    ours, stock = tiny_args(trl_ext.GRPOConfig, str(tmp_path)), tiny_args(trl.GRPOConfig, str(tmp_path))
    for f in dataclasses.fields(trl.GRPOConfig):
        assert getattr(ours, f.name) == getattr(stock, f.name) or f.name in ("logging_dir",), f.name
    assert ours.advantage_estimator == "grpo" and not ours.dynamic_sampling and not ours.soft_overlong_punishment


@pytest.mark.parametrize("config_cls", [trl_ext.GRPOConfig] + [config for config, _ in RECIPES.values()])
def test_every_field_has_a_help_string(config_cls):
    own = {f.name for f in dataclasses.fields(config_cls)} - {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    overridden = set(config_cls.__dataclass_fields__) & set(vars(config_cls).get("__annotations__", {}))
    for f in dataclasses.fields(config_cls):
        if f.name in own | overridden:
            assert f.metadata.get("help"), f"{config_cls.__name__}.{f.name} has no help string"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (dict(advantage_estimator="ppo"), "`advantage_estimator`='ppo'"),
        (dict(dynamic_sampling=True, dynamic_sampling_on_exhausted="skip"), "dynamic_sampling_on_exhausted"),
        (dict(dynamic_sampling=True, dynamic_sampling_max_rounds=0), "dynamic_sampling_max_rounds"),
        (dict(advantage_estimator="magistral", steps_per_generation=2), "gradient_accumulation_steps"),
        (dict(advantage_estimator="rloo", multi_objective_aggregation="normalize_then_sum"), "sum_then_normalize"),
        (dict(advantage_estimator="rloo", num_generations_eval=1), "num_generations_eval=1"),
        (dict(soft_overlong_punishment=True, overlong_cache_length=9), "overlong_cache_length"),
    ],
)
def test_validation_errors_name_the_field(overrides, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        tiny_args(trl_ext.GRPOConfig, str(tmp_path), **overrides)


def test_dynamic_sampling_rejects_groups_straddling_processes(tmp_path, monkeypatch):
    import transformers

    monkeypatch.setattr(transformers.TrainingArguments, "world_size", property(lambda self: 2))
    tiny_args(trl_ext.GRPOConfig, str(tmp_path), per_device_train_batch_size=2)  # TRL allows it
    with pytest.raises(ValueError, match="straddle.*per_device_train_batch_size"):
        tiny_args(trl_ext.GRPOConfig, str(tmp_path), per_device_train_batch_size=2, dynamic_sampling=True)


def test_recipe_trainer_rejects_a_plain_trl_config(tmp_path, tiny_policy_path):
    with pytest.raises(TypeError, match="DAPOConfig"):
        trl_ext.DAPOTrainer(model=tiny_policy_path, args=tiny_args(trl.GRPOConfig, str(tmp_path)))


def test_configs_parse_from_the_command_line():
    (args,) = trl.TrlParser((trl_ext.DAPOConfig,)).parse_args_and_config(
        ["--output_dir", "out", "--use_cpu", "--bf16", "false", "--dynamic_sampling_reward_funcs", "accuracy", "code"]
    )
    assert args.dynamic_sampling_reward_funcs == ["accuracy", "code"]
    assert args.dynamic_sampling and args.epsilon_high == 0.28


def test_extended_trainer_accepts_a_plain_trl_config(tmp_path, tiny_policy_path):
    args = tiny_args(trl.GRPOConfig, str(tmp_path))
    trainer = trl_ext.GRPOTrainer(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(8)
    )
    assert type(trainer.args) is trl_ext.GRPOConfig and args.per_device_train_batch_size == 8  # a copy, extensions off
    assert trainer.args.advantage_estimator == "grpo" and not trainer.args.dynamic_sampling
    assert trainer.args.learning_rate == args.learning_rate and trainer.args.output_dir == args.output_dir


def test_model_card_names_the_recipe_and_cites_its_paper(tmp_path, tiny_policy_path):
    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path,
        reward_funcs=scripted_reward,
        args=tiny_args(trl_ext.DAPOConfig, str(tmp_path)),
        train_dataset=scores_dataset(8),
    )
    trainer.create_model_card(model_name="tiny-dapo")
    card = (tmp_path / "README.md").read_text()
    assert "trained with **DAPO**" in card and "arXiv:2503.14476" in card and "- trl-ext" in card
    assert "fine-tuned version of None" not in card and "a local model at `" in card  # trl_ext's card, not TRL's
