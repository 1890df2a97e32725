"""Resets under FSDP2 with two processes on CPU: the copy works on DTensor shards, the reference is saved per process
and loads back exactly."""

import json
import os
import subprocess
import sys

import pytest

from tests._launch import ROOT

SCRIPT = os.path.join(ROOT, "tests", "scripts", "reset_fsdp2.py")


@pytest.mark.slow
def test_fsdp2_reset_copies_shards_and_the_reference_round_trips(tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29662",
               SCRIPT, str(tmp_path)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    for rank in range(2):
        report = json.loads((tmp_path / f"report-{rank}.json").read_text())
        assert report["dtensor"] and report["copy_exact"] and report["loaded"] and report["load_exact"]
        assert report["files"] == [
            "index.json", "rank-00000-of-00002-00000.safetensors", "rank-00001-of-00002-00000.safetensors"
        ]  # fmt: skip
