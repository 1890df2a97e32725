"""Launch a script with two processes on CPU through `accelerate launch` (DDP or a DeepSpeed config)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHERS = {
    "ddp": ["--multi_gpu"],
    "zero2": ["--config_file", os.path.join(ROOT, "trl_ext", "accelerate_configs", "zero2.yaml")],
    "zero3": ["--config_file", os.path.join(ROOT, "trl_ext", "accelerate_configs", "zero3.yaml")],
}


def launch_two_processes(backend: str, script: str, args: list[str], port: int, timeout: int = 540):
    """Run ``script args`` on two CPU processes; assert it succeeded (printing its output tail if not).

    ``backend``: a key of LAUNCHERS, or the path of an accelerate config file that sets everything itself (one with a
    ``deepspeed_config_file`` must not get --mixed_precision).
    """
    launcher = LAUNCHERS.get(backend) or ["--config_file", backend]
    precision = ["--mixed_precision", "no"] if backend in LAUNCHERS else []
    command = [
        sys.executable, "-m", "accelerate.commands.launch", *launcher, "--num_processes", "2",
        "--num_machines", "1", *precision, "--main_process_port", str(port), script, *args,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        clues = [
            line
            for line in output.splitlines()
            if any(w in line for w in ("Error", "error:", "terminate", "what()", "Abort"))
        ]
        raise AssertionError("\n".join(clues[-40:]) + "\n---\n" + result.stderr[-6000:])
    return result


def write_report_and_exit(trainer, output_dir: str, report: dict) -> None:
    """In a launched script: write this rank's JSON report, wait for every rank, and leave without C++ teardown.

    On loaded CPU runs a rank sometimes aborted at exit after all work was done (SIGABRT in gloo/DeepSpeed
    teardown, "terminate called without an active exception"); nothing is left to tear down that matters.
    """
    import json

    with open(os.path.join(output_dir, f"report-{trainer.accelerator.process_index}.json"), "w") as handle:
        json.dump(report, handle)
    trainer.accelerator.wait_for_everyone()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
