"""One rule for the ``args`` of every trl_ext trainer (``trl_ext.trainers.configs.resolve_config``): a plain TRL config
becomes a copy of the trl_ext Config with every extension at its default, where that Config keeps TRL's defaults; a
paper recipe, whose Config changes TRL's defaults, refuses one."""

from dataclasses import fields

import pytest
import trl

from trl_ext.recipes import REGISTRY
from trl_ext.trainers.configs import resolve_config, trl_config_class

PLAIN_ACCEPTED = {"grpo", "dpo", "reward"}  # Configs that only add off-by-default extensions to TRL's


@pytest.mark.parametrize("recipe", sorted(REGISTRY))
def test_a_plain_trl_config_is_upgraded_or_refused_by_one_rule(recipe, tmp_path):
    config_cls, trainer_cls = REGISTRY[recipe].classes()
    plain_cls = trl_config_class(config_cls)
    assert plain_cls.__module__.startswith("trl.") and plain_cls in (trl.GRPOConfig, trl.DPOConfig, trl.RewardConfig)
    plain = plain_cls(output_dir=str(tmp_path), learning_rate=0.125, use_cpu=True, bf16=False, report_to="none")
    if recipe not in PLAIN_ACCEPTED:
        with pytest.raises(TypeError, match=config_cls.__name__):
            resolve_config(trainer_cls, "org/tiny", plain)
        return
    resolved = resolve_config(trainer_cls, "org/tiny", plain)
    assert type(resolved) is config_cls and type(plain) is plain_cls and resolved is not plain
    assert (resolved.learning_rate, resolved.output_dir) == (0.125, str(tmp_path))
    trl_names = {field.name for field in fields(plain_cls)}
    reference = config_cls(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none")
    for field in fields(config_cls):
        if field.name not in trl_names:  # every extension at its default
            assert getattr(resolved, field.name) == getattr(reference, field.name), field.name


def test_no_args_gives_the_recipe_config_in_trls_default_folder():
    made = []
    trainer_cls = type("DrGRPOTrainer", (), {"config_class": lambda **kwargs: made.append(kwargs) or kwargs})
    assert resolve_config(trainer_cls, "org/tiny-model", None) == {"output_dir": "tiny-model-DrGRPO"}
    assert made == [{"output_dir": "tiny-model-DrGRPO"}]


def test_a_trl_ext_config_is_taken_as_given(tmp_path):
    config_cls, trainer_cls = REGISTRY["dapo"].classes()
    args = config_cls(output_dir=str(tmp_path), use_cpu=True, bf16=False)
    assert resolve_config(trainer_cls, "m", args) is args
