"""Resets that scale, under DeepSpeed ZeRO-3 with two processes on CPU: the reset copies partitions with no gather,
the reference is saved per process with no gather, and a resume from the checkpoint after a reset is exact."""

import json
import os

import pytest

from tests._launch import ROOT, launch_two_processes
from trl_ext.resets import REFERENCE_DIR, REFERENCE_INDEX

SCRIPT = os.path.join(ROOT, "tests", "scripts", "reset_zero3_scale.py")
# ZeRO-3 with a low persistence threshold: the tiny model's matrices stay partitioned between uses while its 32- and
# 64-element vectors persist gathered (as a large model's norms and biases do), so both copy paths are exercised.
DEEPSPEED = {
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100},
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
}
ACCELERATE = """compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_config_file: {path}
  zero3_init_flag: true
num_machines: 1
num_processes: 2
machine_rank: 0
rdzv_backend: static
same_network: true
use_cpu: false
"""


def reports(directory):
    return [json.loads((directory / f"report-{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.slow
def test_zero3_reset_and_save_gather_nothing_and_resume_is_exact(tmp_path, tiny_policy_path):
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    (tmp_path / "ds.json").write_text(json.dumps(DEEPSPEED))
    config = tmp_path / "zero3.yaml"
    config.write_text(ACCELERATE.format(path=tmp_path / "ds.json"))
    launch_two_processes(str(config), SCRIPT, [tiny_policy_path, str(full)], 29651)
    checkpoint = full / "checkpoint-2"
    launch_two_processes(str(config), SCRIPT, [tiny_policy_path, str(resumed), str(checkpoint)], 29652)

    for report in reports(full):
        assert report["resets"] == [2] and report["partitioned"]
        assert report["largest_gather"] == {"reset": 0, "save": 0, "instrument_check": 1}
        assert report["persistent"] > 0  # small parameters stay gathered under ZeRO-3: that path is exercised too
    saved = sorted(p.name for p in (checkpoint / REFERENCE_DIR).iterdir())
    assert "rank-00000-of-00002-00000.safetensors" in saved and "rank-00001-of-00002-00000.safetensors" in saved
    assert json.loads((checkpoint / REFERENCE_DIR / REFERENCE_INDEX).read_text())["world_size"] == 2

    (a0, a1), (b0, b1) = reports(full), reports(resumed)
    assert a0["reference"] == a1["reference"] == b0["reference"] == b1["reference"]
    assert a0["policy"] == b0["policy"] == b1["policy"]
    assert len(a0["kl"]) == 3 and a0["kl"] == b0["kl"] == b1["kl"]
