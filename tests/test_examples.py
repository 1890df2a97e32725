"""The short Python examples run end to end on the tiny offline models (one step each)."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


@pytest.mark.parametrize("example", ["dapo_math", "ppo_reward_model", "mine_dpo_pairs", "code_rl_sandbox"])
def test_example_runs_on_the_tiny_model(example, tmp_path, tiny_policy_path, tiny_reward_model_path):
    command = [sys.executable, os.path.join(EXAMPLES, f"{example}.py"), "--model", tiny_policy_path, "--cpu",
               "--max_steps", "1", "--output_dir", str(tmp_path)]  # fmt: skip
    if example == "ppo_reward_model":
        command += ["--reward_model", tiny_reward_model_path]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
