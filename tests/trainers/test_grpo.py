"""The extended GRPOTrainer and the recipe trainers on the tiny model: stock equivalence, estimators in a real step."""

from __future__ import annotations

import math

import pytest
import torch
import trl

import trl_ext
from tests.scripts.grpo_family import G, recording, scores_dataset, scripted_reward, tiny_args
from trl_ext.core import group_normalized, leave_one_out, minibatch_normalized


def _losses(trainer) -> list[float]:
    return [log["loss"] for log in trainer.state.log_history if "loss" in log]


def test_extensions_off_match_stock_trl_step_for_step(tiny_policy_path, tmp_path):
    def train(trainer_cls, config_cls):
        args = tiny_args(config_cls, str(tmp_path / trainer_cls.__module__), max_steps=3, learning_rate=1e-3)
        trainer = trainer_cls(
            model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16)
        )
        trainer.train()
        return trainer

    stock, ours = train(trl.GRPOTrainer, trl.GRPOConfig), train(trl_ext.GRPOTrainer, trl_ext.GRPOConfig)
    assert len(_losses(stock)) == 3
    assert _losses(ours) == _losses(stock)
    for (name, p_stock), p_ours in zip(stock.model.named_parameters(), ours.model.parameters()):
        assert torch.equal(p_stock, p_ours), name
    assert not any(key.startswith("dynamic_sampling/") for log in ours.state.log_history for key in log)


@pytest.mark.parametrize(
    ("trainer_cls", "config_cls", "reference"),
    [
        (trl_ext.GRPOTrainer, trl_ext.GRPOConfig, lambda r: group_normalized(r, G)),
        (trl_ext.DrGRPOTrainer, trl_ext.DrGRPOConfig, lambda r: group_normalized(r, G, scale="none")),
        (trl_ext.RLOOTrainer, trl_ext.RLOOConfig, lambda r: leave_one_out(r, G)),
        (trl_ext.MagistralTrainer, trl_ext.MagistralConfig, lambda r: minibatch_normalized(r, G, r.numel())),
    ],
    ids=["grpo", "dr_grpo", "rloo", "magistral"],
)
def test_advantages_in_a_training_step_equal_trl_ext_core(
    trainer_cls, config_cls, reference, tiny_policy_path, tmp_path
):
    seen = []
    # Magistral's dynamic sampling is switched off here so that the batch is exactly the generated one.
    args = tiny_args(config_cls, str(tmp_path), dynamic_sampling=False, learning_rate=1e-3)
    trainer = recording(trainer_cls, seen)(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16)
    )
    trainer.train()
    assert len(seen) == 2 and all(math.isfinite(loss) for loss in _losses(trainer))
    for batch in seen:
        (rewards_per_func,) = batch["rounds"]
        total = (rewards_per_func * trainer.reward_weights).sum(dim=1)  # no NaN rewards here
        torch.testing.assert_close(batch["advantages"], reference(total), rtol=0, atol=1e-6)
        assert batch["advantages"].abs().sum() > 0
    # TRL's completions table shows these advantages, not its own group-normalised ones.
    assert list(trainer._logs["advantages"]) == pytest.approx(seen[-1]["advantages"].tolist())
    # The recipes that add the soft overlong punishment log it as its own reward.
    if config_cls is trl_ext.MagistralConfig:
        assert trainer.reward_func_names == ["scripted_reward", "soft_overlong_punishment"]


def test_overlong_punishment_keeps_the_users_reward_weights(tiny_policy_path, tmp_path):
    args = tiny_args(trl_ext.DAPOConfig, str(tmp_path), reward_weights=[2.0], overlong_cache_length=4)
    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path, reward_funcs=[scripted_reward], args=args, train_dataset=scores_dataset(16)
    )
    assert trainer.reward_weights.tolist() == [2.0, 1.0]
    punishment = trainer.reward_funcs[-1]
    assert punishment(["a", "b", "c"], completion_ids=[[1] * 4, [1] * 6, [1] * 8]) == pytest.approx([0.0, -0.5, -1.0])


def test_dapo_trains(tiny_policy_path, tmp_path):
    # Truncated completions are masked in DAPO; the random tiny model rarely stops, so let a few tokens count.
    args = tiny_args(trl_ext.DAPOConfig, str(tmp_path), mask_truncated_completions=False, learning_rate=1e-3)
    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 2)
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert len(_losses(trainer)) == 2 and all(math.isfinite(loss) for loss in _losses(trainer))
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.model.parameters()))
    assert all("dynamic_sampling/rounds" in log for log in trainer.state.log_history if "loss" in log)


def test_trainers_keep_the_hook_signatures_for_subclasses():
    from trl_ext.trainers._trl_hooks import check_trl_hooks

    for trainer_cls in (trl_ext.GRPOTrainer, trl_ext.DAPOTrainer, trl_ext.MagistralTrainer):
        assert check_trl_hooks(trainer_cls) == []
