"""Reference resets with two processes on CPU: DDP, DeepSpeed ZeRO-2 and ZeRO-3 (DESIGN §5)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "reset_distributed.py")
LAUNCH = {
    "ddp": ["--multi_gpu"],
    "zero2": ["--config_file", os.path.join(ROOT, "examples", "accelerate", "deepspeed_zero2.yaml")],
    "zero3": ["--config_file", os.path.join(ROOT, "examples", "accelerate", "deepspeed_zero3.yaml")],
}
PORTS = {"ddp": 29611, "zero2": 29612, "zero3": 29613}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(LAUNCH))
def test_two_process_reset(backend, tmp_path, tiny_policy_path):
    command = [
        sys.executable, "-m", "accelerate.commands.launch", *LAUNCH[backend], "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--main_process_port", str(PORTS[backend]),
        SCRIPT, tiny_policy_path, str(tmp_path), backend,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    reports = [json.loads((tmp_path / f"report-{rank}.json").read_text()) for rank in range(2)]
    for report in reports:
        assert report["resets"] == 1
        assert report["max_ref_diff"] == 0.0
        assert report["state_tensors"] > 0 and report["state_nonzero"] == 0
        assert report["lr"] == pytest.approx(5e-3 * (1 - 2 / 3))
        assert report["kl"][1] > 0 and report["kl"][2] == pytest.approx(0.0, abs=1e-7)
    assert reports[0]["kl"] == reports[1]["kl"]
