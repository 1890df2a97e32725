"""Latency of one sandboxed run of `pass`, per backend, against a baseline checkout measured in the same run.

    python scripts/bench_sandbox_latency.py --baseline /path/to/old/checkout --runs 40 --backends bwrap,landlock

``--judged``: a judged run instead (calls mode: one call of a one-line function, the harness's own guards, such
as its audit hook and signal-handler filter, included).

Each checkout runs in a long-lived worker process of its own (its package on PYTHONPATH); requests alternate
between the two, so both see the same machine load. Prints the median and p90 per backend and the ratio
current/baseline (below 1: faster now).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_WORKER = """
import json, sys, time
from trl_ext.sandbox import Limits, run, run_tests
CALL = {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 2}]}
for line in sys.stdin:
    backend = line.strip()
    start = time.perf_counter()
    if sys.argv[1] == "judged":
        report = run_tests("def f(x):\\n    return 2 * x\\n", CALL, backend=backend, limits=Limits(timeout_s=10))
        status = "ok" if report.all_passed else str(report.statuses)
    else:
        status = run("pass", backend=backend, limits=Limits(timeout_s=10)).status
    print(json.dumps([time.perf_counter() - start, status]), flush=True)
"""


def _worker(checkout: Path, judged: bool) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", _WORKER, "judged" if judged else "script"]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/")


def _time(worker: subprocess.Popen, backend: str) -> float:
    worker.stdin.write(backend + "\n")
    worker.stdin.flush()
    seconds, status = json.loads(worker.stdout.readline())
    if status != "ok":
        raise RuntimeError(f"a run on {backend} ended with status {status}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--backends", default="bwrap,landlock")
    parser.add_argument("--judged", action="store_true", help="a calls-mode run of one call instead of `pass`")
    args = parser.parse_args()
    workers = {"current": _worker(Path(__file__).resolve().parent.parent, args.judged)}
    if args.baseline:
        workers["baseline"] = _worker(args.baseline.resolve(), args.judged)
    for backend in args.backends.split(","):
        times: dict[str, list[float]] = {name: [] for name in workers}
        for worker in workers.values():
            _time(worker, backend)  # warm-up: backend self-test, imports
        for _ in range(args.runs):
            for name, worker in workers.items():
                times[name].append(_time(worker, backend))
        line = [f"{backend:9s}"]
        for name, values in times.items():
            p90 = statistics.quantiles(values, n=10)[-1]
            line.append(f"{name}: median {statistics.median(values) * 1e3:6.1f} ms, p90 {p90 * 1e3:6.1f} ms")
        if "baseline" in times:
            ratio = statistics.median(times["current"]) / statistics.median(times["baseline"])
            line.append(f"ratio current/baseline {ratio:.2f}")
        print(" | ".join(line), flush=True)
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()


if __name__ == "__main__":
    main()
