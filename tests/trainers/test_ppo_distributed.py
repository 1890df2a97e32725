"""PPOTrainer with two processes on CPU over gloo (DDP, DeepSpeed ZeRO-2): global whitening, a critic kept in sync,
checkpoints and exact resume."""

import json
import os

import pytest

from tests._launch import ROOT, launch_two_processes

SCRIPT = os.path.join(ROOT, "tests", "scripts", "ppo_distributed.py")
PORTS = {"ddp": 29631, "zero2": 29632}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(PORTS))
def test_two_process_ppo(backend, tmp_path, tiny_policy_path):
    launch_two_processes(backend, SCRIPT, [tiny_policy_path, str(tmp_path), backend], PORTS[backend])
    reports = [json.loads((tmp_path / f"report-{rank}.json").read_text()) for rank in range(2)]
    assert all(r["num_processes"] == 2 and r["critic_is_ddp"] and r["critic_moved"] for r in reports)
    assert all(r["deepspeed"] == (backend == "zero2") for r in reports)
    # DDP keeps both replicas of the policy and of the critic identical.
    assert reports[0]["policy"] == reports[1]["policy"]
    assert reports[0]["critic"] == reports[1]["critic"]
    assert reports[0]["value_loss"] == reports[1]["value_loss"]  # logged as the mean over processes
    for report in reports:  # resuming from checkpoint-2 reproduces step 3
        assert report["resumed_steps"] == [1, 2, 3]  # steps 1-2 come from the checkpoint's trainer state
        for key in ("policy", "critic"):
            assert report[f"resumed_{key}"] == pytest.approx(report[key], abs=1e-5), key
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
