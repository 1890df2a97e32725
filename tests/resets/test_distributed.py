"""Reference resets with two processes on CPU: DDP, DeepSpeed ZeRO-2 and ZeRO-3."""

import json
import os

import pytest

from tests._launch import ROOT, launch_two_processes

SCRIPT = os.path.join(ROOT, "tests", "scripts", "reset_distributed.py")
PORTS = {"ddp": 29611, "zero2": 29612, "zero3": 29613}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(PORTS))
def test_two_process_reset(backend, tmp_path, tiny_policy_path):
    launch_two_processes(backend, SCRIPT, [tiny_policy_path, str(tmp_path), backend], PORTS[backend])
    reports = [json.loads((tmp_path / f"report-{rank}.json").read_text()) for rank in range(2)]
    for report in reports:
        assert report["resets"] == 1
        assert report["max_ref_diff"] == 0.0
        assert report["state_tensors"] > 0 and report["state_nonzero"] == 0
        assert report["lr"] == pytest.approx(5e-3 * (1 - 2 / 3))
        assert report["kl"][1] > 0 and report["kl"][2] == pytest.approx(0.0, abs=1e-7)
    assert reports[0]["kl"] == reports[1]["kl"]
