"""Launch a script with two processes on CPU through `accelerate launch` (DDP or a DeepSpeed config)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHERS = {
    "ddp": ["--multi_gpu"],
    "zero2": ["--config_file", os.path.join(ROOT, "examples", "accelerate", "deepspeed_zero2.yaml")],
    "zero3": ["--config_file", os.path.join(ROOT, "examples", "accelerate", "deepspeed_zero3.yaml")],
}


def launch_two_processes(backend: str, script: str, args: list[str], port: int, timeout: int = 540):
    """Run ``script args`` on two CPU processes; assert it succeeded (printing its output tail if not)."""
    command = [
        sys.executable, "-m", "accelerate.commands.launch", *LAUNCHERS[backend], "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--main_process_port", str(port), script, *args,
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
