"""Trainer CPU spent watching one sandboxed run (scratch and memory watcher, landlock), per checkout, measured in
one run against a baseline checkout.

    python scripts/bench_watcher.py --baseline /path/to/old/checkout --backend landlock --fork-server 1

Run it as the uid the trainer has (landlock as non-root: e.g. inside
`bwrap --dev-bind / / --proc /proc --unshare-pid --unshare-user --disable-userns --uid 1000 --gid 1000`).
Each checkout runs in a worker process of its own (its package on PYTHONPATH), which runs a program that only
sleeps and one that fills every descriptor (``nofile``) in as many processes as ``nproc`` allows and sleeps as
long; the worker's own CPU time (the watcher thread included) is measured around each run. Prints, per checkout,
the extra trainer cores the busy program costs over the sleeping one, and the ratio current/baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SLEEP_S = 4
_BUSY = f"""
import os, time
fds = []
try:
    while True:
        fds.append(os.open('/dev/null', os.O_RDONLY))
except OSError:
    pass
for _ in range(40):
    try:
        if os.fork() == 0:
            time.sleep({SLEEP_S}); os._exit(0)
    except OSError:
        break
time.sleep({SLEEP_S})
"""
_WORKER = """
import json, os, sys, time
from trl_ext.sandbox import Limits, run
programs = json.loads(sys.argv[1])
run("pass", backend=sys.argv[2])  # warm: the fork server starts here
for name in ("idle", "busy", "idle", "busy"):
    before, start = os.times(), time.monotonic()
    result = run(programs[name], backend=sys.argv[2], limits=Limits(timeout_s=programs["timeout"]))
    after = os.times()
    cpu = after.user + after.system - before.user - before.system
    print(json.dumps([name, cpu, time.monotonic() - start, result.status]), flush=True)
"""


def _measure(checkout: Path, backend: str, fork_server: str) -> float:
    """Extra trainer cores of the busy program over the idle one (the mean of two pairs)."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["TRL_EXT_SANDBOX_FORKSERVER"] = fork_server
    programs = json.dumps({"idle": f"import time\ntime.sleep({SLEEP_S})", "busy": _BUSY, "timeout": SLEEP_S + 3})
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, programs, backend], env=env, cwd="/", capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: the worker failed:\n{done.stderr[-2000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    cpu = {name: sum(c for n, c, _, _ in rows if n == name) for name in ("idle", "busy")}
    wall = sum(w for n, _, w, _ in rows if n == "busy")
    return (cpu["busy"] - cpu["idle"]) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with (its repository root)")
    parser.add_argument("--backend", default="landlock")
    parser.add_argument("--fork-server", default="1", choices=("0", "1"))
    args = parser.parse_args()
    current = _measure(Path(__file__).resolve().parents[1], args.backend, args.fork_server)
    print(f"current: {current:.3f} extra trainer cores per busy run ({args.backend}, fork server {args.fork_server})")
    if args.baseline is not None:
        baseline = _measure(args.baseline.resolve(), args.backend, args.fork_server)
        print(f"baseline: {baseline:.3f} extra trainer cores per busy run")
        print(f"ratio current/baseline: {current / max(baseline, 1e-9):.2f}")


if __name__ == "__main__":
    main()
