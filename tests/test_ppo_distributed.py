"""PPOTrainer with two processes on CPU (DDP over gloo): global whitening, a DDP critic kept in sync, checkpoints."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "ppo_distributed.py")


@pytest.mark.slow
def test_two_process_ppo(tmp_path, tiny_policy_path):
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--main_process_port", "29631",
        SCRIPT, tiny_policy_path, str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    reports = [json.loads((tmp_path / f"report-{rank}.json").read_text()) for rank in range(2)]
    assert all(r["num_processes"] == 2 and r["critic_is_ddp"] and r["critic_moved"] for r in reports)
    # DDP keeps both replicas of the policy and of the critic identical.
    assert reports[0]["policy"] == reports[1]["policy"]
    assert reports[0]["critic"] == reports[1]["critic"]
    assert reports[0]["value_loss"] == reports[1]["value_loss"]  # logged as the mean over processes
    # Whitening used the statistics of both processes: each rank alone is not centred, their union is.
    for rollout in zip(*(r["whitening_sums"] for r in reports)):
        count = sum(sums[0] for sums in rollout)
        mean = sum(sums[1] for sums in rollout) / count
        second_moment = sum(sums[2] for sums in rollout)
        assert mean == pytest.approx(0.0, abs=1e-5)
        assert max(abs(sums[1] / sums[0]) for sums in rollout) > 1e-2  # not whitened per process
        assert (second_moment - count * mean**2) / (count - 1) == pytest.approx(1.0, abs=1e-4)
    assert (tmp_path / "checkpoint-2" / "critic" / "model.safetensors").exists()
    assert (tmp_path / "checkpoint-2" / "critic_optimizer.pt").exists()
    assert (tmp_path / "critic" / "config.json").exists()
