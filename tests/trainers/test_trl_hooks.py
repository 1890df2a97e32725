"""Guard: every TRL private hook trl_ext wraps still has the signature trl_ext relies on."""

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

    from trl_ext.trainers._trl_dpo import DPO_HOOKS
    from trl_ext.trainers._trl_ppo import PPO_TRL_HOOKS
    from trl_ext.trainers._trl_reward import REWARD_HOOKS

    assert check_trl_hooks(None, PPO_TRL_HOOKS) == []
    assert check_trl_hooks(DPOTrainer, DPO_HOOKS) == []
    assert check_trl_hooks(RewardTrainer, REWARD_HOOKS) == []


def test_trainer_checkpoint_push_hook_matches_the_installed_transformers():
    from transformers import Trainer

    from trl_ext.trainers._trl_hooks import TRAINER_PUSH_HOOKS

    assert check_trl_hooks(Trainer, TRAINER_PUSH_HOOKS) == []


def test_trl_internals_the_dynamic_sampling_replay_relies_on():
    """Dynamic sampling generates with ``_generate`` and replays the kept rows into ``_generate_and_score_completions``
    through ``_generate_single_turn`` and ``_calculate_rewards``: fail loudly if TRL changes that flow."""
    import inspect

    from trl import GRPOTrainer

    from trl_ext.trainers._trl_hooks import GENERATE_OUTPUTS, GRPO_ATTRIBUTES

    generate = inspect.getsource(GRPOTrainer._generate)
    assert "return " + ", ".join(GENERATE_OUTPUTS) in generate
    assert "self._generate_single_turn(" in generate
    step = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "= self._generate(prompts)" in step
    assert step.count("self._calculate_rewards(") == 1 and "self._generate_single_turn(" not in step
    init = inspect.getsource(GRPOTrainer.__init__)
    assert all(f"self.{name} =" in init for name in GRPO_ATTRIBUTES)


def test_trl_vllm_sleep_mode_behaves_as_trl_ext_assumes():
    """With colocate sleep mode TRL sleeps at level 2 after every generate and re-pushes the weights before the next
    one (flagged by ``_llm_weights_sleeping``); trl_ext defers that sleep to the end of a step's rounds."""
    import inspect

    from trl.generation.vllm_generation import VLLMGeneration

    generate = inspect.getsource(VLLMGeneration.generate)
    assert "self.llm.sleep(level=2)" in generate and "self._llm_weights_sleeping = True" in generate
    assert "self._llm_weights_sleeping:\n            self.sync_weights()" in generate
    assert 'self.llm.wake_up(tags=["kv_cache"])' in generate
    sync = inspect.getsource(VLLMGeneration.sync_weights)
    assert 'self.llm.wake_up(tags=["weights"])' in sync and "self._llm_weights_sleeping = False" in sync
