"""The reward instances plug into stock TRL 1.16 GRPOTrainer: names, kwargs, the async path, None handling."""

import json
import math

import trl
from datasets import Dataset

from trl_ext.rewards import code_tests_async, math_accuracy, overlong_penalty, think_format


def test_rewards_in_a_grpo_training_step(tiny_policy_path, tmp_path):
    tests = json.dumps({"kind": "stdio", "cases": [{"input": "", "output": "1"}]})
    dataset = Dataset.from_dict(
        {
            "prompt": [f"What is {i} + 1?" for i in range(4)],
            "solution": ["1", "2", "See the proof.", "4"],  # row 2: unparseable gold -> None
            "tests": [tests] * 4,
        }
    )
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )
    rewards = [math_accuracy, think_format, code_tests_async, overlong_penalty(max_length=8, cache_length=4)]
    trainer = trl.GRPOTrainer(model=tiny_policy_path, reward_funcs=rewards, args=args, train_dataset=dataset)
    assert trainer.reward_func_names == ["math_accuracy", "think_format", "code_tests", "overlong_penalty"]
    trainer.train()
    logged = trainer.state.log_history[0]
    for name in trainer.reward_func_names:
        assert math.isfinite(logged[f"rewards/{name}/mean"]), name
    # a random tiny model writes neither a boxed answer, a think block nor code
    assert logged["rewards/math_accuracy/mean"] == 0.0 and logged["rewards/code_tests/mean"] == 0.0
    assert -1.0 <= logged["rewards/overlong_penalty/mean"] <= 0.0
    assert "math_accuracy/gold_error" in logged and logged["code_tests/no_code"] == 1.0  # through log_metric
