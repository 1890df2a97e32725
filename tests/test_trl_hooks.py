"""Guard: every TRL private hook trl_ext wraps still has the signature trl_ext relies on (DESIGN §4)."""

import pytest

from trl_ext.trainers._trl_hooks import GRPO_HOOKS, check_trl_hooks, require_trl_hooks


def test_installed_trl_has_every_wrapped_hook():
    assert check_trl_hooks() == []


def test_guard_reports_a_changed_signature():
    class Drifted:
        def _calculate_rewards(self, inputs, prompts, completions):  # completion_ids_list was dropped
            pass

    hooks = {"_calculate_rewards": GRPO_HOOKS["_calculate_rewards"], "training_step": GRPO_HOOKS["training_step"]}
    problems = check_trl_hooks(Drifted, hooks)
    assert len(problems) == 2
    assert "_calculate_rewards" in problems[0] and "no longer starts with" in problems[0]
    assert "training_step no longer exists" in problems[1]
    with pytest.raises(RuntimeError, match="does not support the installed TRL"):
        require_trl_hooks(Drifted, hooks)


def test_every_trainer_hook_table_matches_the_installed_trl():
    from trl import DPOTrainer, RewardTrainer

    from trl_ext.trainers._trl_hooks import DPO_HOOKS, PPO_TRL_HOOKS, REWARD_HOOKS

    assert check_trl_hooks(None, PPO_TRL_HOOKS) == []
    assert check_trl_hooks(DPOTrainer, DPO_HOOKS) == []
    assert check_trl_hooks(RewardTrainer, REWARD_HOOKS) == []


def test_trainer_checkpoint_push_hook_matches_the_installed_transformers():
    from transformers import Trainer

    from trl_ext.trainers._trl_hooks import TRAINER_PUSH_HOOKS

    assert check_trl_hooks(Trainer, TRAINER_PUSH_HOOKS) == []
