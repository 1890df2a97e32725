"""Throughput of the verifiable rewards: math verifications/s and sandbox overhead/runs per second.

    OMP_NUM_THREADS=1 python scripts/bench_rewards.py [--workers N] [--items 192] [--runs 40]
    OMP_NUM_THREADS=1 python scripts/bench_rewards.py --baseline /tmp/base   # math and code rates vs older code
    OMP_NUM_THREADS=1 python scripts/bench_rewards.py --baseline /tmp/base --math_only --rounds 5 --items 400

Prints: math verifications/s with 1 worker and with N workers (and the ratio; the target is >= 1.8x with
2 workers) on decimals (decimal answers to fraction golds, decided in the workers from their printed digits), on
expressions (surds: math-verify's parser and sympy in the workers on every pair) and on integer fractions (decided
exactly in the calling process, so the worker count does not matter there),
the sandbox's per-run overhead against a bare ``python -c pass`` subprocess, sandbox runs/s
with as many concurrent runs as CPU cores, the same per isolated backend (bwrap, landlock, remote -> this
machine's sandbox-serve), stdio test cases/s inside one sandbox (one fork per case), and programs graded/s
by ``CodeTests`` against the classic unsandboxed harness on the same problems (``bench_code_grading.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_code_grading import print_code_grading  # this directory: sandboxed vs classic code grading

from trl_ext.rewards.math import MathAccuracy, shared_pool
from trl_ext.sandbox import Limits, get_backend, run, run_tests

MIXES = ("decimals", "expressions", "fractions")


def _math_batch(n: int, offset: int, mix: str = "fractions") -> tuple[list[str], list[str]]:
    """n distinct (gold, completion) pairs, half correct, so deduplication does not shrink the work. The
    "decimals" mix (decimal answers to fraction golds) is decided in the workers (by math-verify's parser and
    sympy before the workers read plain numbers from their digits); "expressions" (surds) needs math-verify's
    parser and sympy on every pair; "fractions" (integer fractions) is decided exactly in the calling process."""
    golds, completions = [], []
    for k in range(offset, offset + n):
        a, b = k + 2, 2 * k + 3
        if mix == "fractions":
            golds.append(rf"\frac{{{a}}}{{{b}}}")
            answer = rf"\frac{{{2 * a}}}{{{2 * b}}}" if k % 2 else rf"{a} / {b + 1}"
        elif mix == "expressions":
            golds.append(rf"\frac{{{a}\sqrt{{2}}}}{{{b}}}")
            answer = rf"\frac{{{2 * a}}}{{{2 * b}}}\sqrt{{2}}" if k % 2 else rf"\frac{{{a}\sqrt{{3}}}}{{{b}}}"
        else:
            golds.append(rf"\frac{{{a}}}{{{b}}}")
            answer = f"{a / b:.9f}" if k % 2 else f"{a / (b + 1):.9f}"
        completions.append(rf"<think>work</think> The answer is \boxed{{{answer}}}.")
    return golds, completions


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds consumed so far by the processes ``pids`` (Linux /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _time_math(reward: MathAccuracy, items: int, offset: int, mix: str) -> tuple[float, float, float, float]:
    """(verifications/s, average number of busy workers, CPU seconds of this process, CPU seconds of the
    workers) for ``items`` new pairs. CPU time is what a loaded machine does not change much: wall time waits
    for the cores other processes hold."""
    golds, completions = _math_batch(items, offset, mix)
    pids = shared_pool(reward.num_workers).pids()
    cpu_before, own_before, start = _cpu_seconds(pids), time.process_time(), time.perf_counter()
    scores = reward(completions, solution=golds)
    elapsed, own = time.perf_counter() - start, time.process_time() - own_before
    workers_cpu = _cpu_seconds(pids) - cpu_before
    assert scores.count(1.0) == items // 2, scores
    return items / elapsed, workers_cpu / elapsed, own, workers_cpu


def bench_math(workers: int, items: int, rounds: int, mix: str = "fractions") -> tuple[float, float, float]:
    """Best verifications/s with 1 worker and with ``workers`` workers over ``rounds`` alternating timings
    (best-of and alternating because a shared machine's load swings a single timing by 2x), and how many
    workers were busy on average in the best multi-worker timing (the cores the machine actually gave)."""
    figures = bench_math_cpu(workers, items, rounds, mix)
    return figures["1 worker"], figures[f"{workers} workers"], figures["busy"]


def bench_math_cpu(workers: int, items: int, rounds: int, mix: str = "fractions") -> dict[str, float]:
    """``bench_math``'s best rates ("1 worker", "<workers> workers", "busy") and the CPU microseconds per
    verification with 1 worker over all its timings: "cpu_us" (this process and the worker), "parent_us"."""
    single, multi = MathAccuracy(num_workers=1), MathAccuracy(num_workers=workers)
    for reward in (single, multi):  # start and warm every worker (with this mix: decimals start the workers)
        golds, completions = _math_batch(4 * reward.num_workers, 10_000_000 + 1000 * reward.num_workers, mix)
        reward(completions, solution=golds)
    best_single = best_multi = busy = own = workers_cpu = 0.0
    for r in range(rounds):  # the same (new) items for both in each round: equal work
        rate, _, parent_cpu, worker_cpu = _time_math(single, items, r * 100_000, mix)
        best_single, own, workers_cpu = max(best_single, rate), own + parent_cpu, workers_cpu + worker_cpu
        rate, cores, _, _ = _time_math(multi, items, r * 100_000, mix)
        if rate > best_multi:
            best_multi, busy = rate, cores
    shared_pool(1).close()
    shared_pool(workers).close()
    per_item = 1e6 / (rounds * items)
    return {
        "1 worker": best_single,
        f"{workers} workers": best_multi,
        "busy": busy,
        "cpu_us": (own + workers_cpu) * per_item,
        "parent_us": own * per_item,
    }


def _median_wall(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_sandbox(runs: int) -> tuple[float, float, float, float]:
    """Median seconds of: bare ``python -c pass``, bare ``python -I -S -c pass`` (the sandbox's interpreter
    flags), a sandbox run of ``pass``; and sandbox runs/s with cpu_count concurrent runs."""
    get_backend("bwrap")  # self-test once, outside the timing
    bare = _median_wall(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), runs)
    bare_is = _median_wall(lambda: subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True), runs)
    boxed = _median_wall(lambda: run("pass", limits=Limits(timeout_s=10)), runs)
    assert run("pass").status == "ok"
    concurrency = os.cpu_count() or 1
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        statuses = list(pool.map(lambda _: run("print(sum(range(1000)))").status, range(runs)))
    throughput = runs / (time.perf_counter() - start)
    assert statuses == ["ok"] * runs, statuses
    return bare, bare_is, boxed, throughput


def bench_backends(names: list[str], runs: int) -> dict[str, tuple[float, float]]:
    """Per isolated backend: (median seconds of one run of ``pass``, runs/s with cpu_count concurrent runs).
    "remote" is this machine's own ``sandbox-serve`` (auto backend, cpu_count workers) on 127.0.0.1, served from
    a thread of this process: the figure is the protocol's overhead on top of the local sandbox."""
    from trl_ext.sandbox.server import ServeConfig, make_server

    concurrency, figures = os.cpu_count() or 1, {}
    for name in names:
        server, url = None, None
        if name == "remote":
            server = make_server(ServeConfig(port=0, workers=concurrency))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            url = f"http://127.0.0.1:{server.server_address[1]}"
        backend = get_backend(name, url)
        assert run("pass", backend=backend).status == "ok"  # self-test and warm-up outside the timing
        latency = _median_wall(lambda backend=backend: run("pass", limits=Limits(timeout_s=10), backend=backend), runs)
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            statuses = list(
                pool.map(lambda _, b=backend: run("print(sum(range(1000)))", backend=b).status, range(runs))
            )
        figures[name] = (latency, runs / (time.perf_counter() - start))
        assert statuses == ["ok"] * runs, statuses
        if server is not None:
            server.shutdown()
            server.server_close()
    return figures


def bench_stdio_cases(cases: int, rounds: int) -> float:
    """Test cases/s when grading one correct program against a ``cases``-case stdio problem."""
    program = "a, b = map(int, input().split())\nprint(a + b)"
    spec = {"kind": "stdio", "cases": [{"input": f"{i} {i}", "output": str(2 * i)} for i in range(cases)]}
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        assert run_tests(program, spec).all_passed
        best = max(best, cases / (time.perf_counter() - start))
    return best


def _rates(tree: str, problems: int, rounds: int) -> dict[str, float]:
    """Graded programs/s per test kind, measured in a subprocess importing trl_ext from ``tree``."""
    script = Path(__file__).with_name("bench_code_grading.py")
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(script), "--rates_json", "--problems", str(problems), "--rounds", "1"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _math_rates(tree: str, workers: int, items: int, mixes: list[str]) -> dict[str, dict[str, float]]:
    """``bench_math_cpu``'s figures per mix (2 timings each), in a subprocess importing trl_ext from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--math_rates_json", "--workers", str(workers), "--items", str(items)]
    cmd += ["--mixes", ",".join(mixes)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_math_rates_json(workers: int, items: int, mixes: list[str]) -> None:
    print(json.dumps({mix: bench_math_cpu(workers, items, 2, mix) for mix in mixes}))


def compare_math_with_baseline(
    baseline: str, workers: int, items: int, rounds: int, mixes: list[str] | tuple[str, ...] = MIXES
) -> None:
    """Math throughput of this checkout against ``baseline`` in one run: ``rounds`` interleaved pairs of
    subprocesses (which tree goes first alternates). Per round and mix: the CPU-time ratio (baseline's CPU
    microseconds per verification, this process and its 1 worker, over this checkout's: the throughput ratio at
    equal CPU, which a loaded machine skews little), and this checkout's wall-time speed-up with ``workers``
    workers; then the median CPU ratio and the best-of wall rates."""
    here = str(Path(__file__).resolve().parents[1])
    runs: dict[str, list[dict]] = {"current": [], "baseline": []}
    print(f"math, this checkout vs the baseline at {baseline} ({items} pairs per timing, {rounds} rounds):")
    for r in range(rounds):
        sides = [("current", here), ("baseline", baseline)]
        for side, tree in sides if r % 2 == 0 else sides[::-1]:
            runs[side].append(_math_rates(tree, workers, items, list(mixes)))
        now, then = runs["current"][-1], runs["baseline"][-1]
        cells = [
            f"{mix} cpu {now[mix]['cpu_us']:7.0f} vs {then[mix]['cpu_us']:7.0f} us "
            f"-> {then[mix]['cpu_us'] / now[mix]['cpu_us']:.2f}x, {workers}w/1w "
            f"{now[mix][f'{workers} workers'] / now[mix]['1 worker']:.2f}x"
            for mix in mixes
        ]
        print(f"  round {r + 1} (load {os.getloadavg()[0]:.1f}): " + "; ".join(cells))
    for mix in mixes:
        ratios = sorted(b[mix]["cpu_us"] / c[mix]["cpu_us"] for c, b in zip(runs["current"], runs["baseline"]))
        parent = statistics.median(run[mix]["parent_us"] for run in runs["current"])
        parent_then = statistics.median(run[mix]["parent_us"] for run in runs["baseline"])
        cpu = statistics.median(run[mix]["cpu_us"] for run in runs["current"])
        print(
            f"  {mix:11s}: CPU-time ratio median {statistics.median(ratios):.2f}x (min {ratios[0]:.2f}x, max "
            f"{ratios[-1]:.2f}x); this checkout {cpu:.0f} us CPU per verification, {parent:.0f} us of it in the "
            f"calling process (baseline {parent_then:.0f} us)"
        )
        for kind in ("1 worker", f"{workers} workers"):
            now = max(run[mix][kind] for run in runs["current"])
            then = max(run[mix][kind] for run in runs["baseline"])
            print(f"    {kind:9s} best wall rate: {now:8.1f}/s vs {then:8.1f}/s -> {now / then:.2f}x")
        speedups = sorted(run[mix][f"{workers} workers"] / run[mix]["1 worker"] for run in runs["current"])
        print(f"    this checkout, {workers} workers / 1 worker (wall, per round): {speedups}")
        for side in ("current", "baseline"):
            bound = statistics.median(_cpu_bound_speedup(run[mix], workers) for run in runs[side])
            print(
                f"    {side}: {workers} workers / 1 worker on {workers} free cores, from the CPU times: {bound:.2f}x"
            )


def _cpu_bound_speedup(figures: dict[str, float], workers: int) -> float:
    """The speed-up of ``workers`` workers over one that the CPU times allow when ``workers`` cores are free: one
    worker runs beside this process (a verification takes the longer of the two), more share the cores with it
    (``workers`` verifications take all their CPU time over ``workers`` cores). A loaded machine does not change
    it much, unlike the wall-time ratio, which needs the cores free."""
    parent = figures["parent_us"]
    worker = figures["cpu_us"] - parent
    return max(worker, parent) / max((worker + parent) / workers, parent)


def compare_with_baseline(baseline: str, problems: int, rounds: int) -> None:
    """Graded programs/s of this checkout against ``baseline`` (another checkout of trl_ext), in one run:
    alternating subprocess timings, the best of ``rounds`` each, per test kind and in total."""
    here = str(Path(__file__).resolve().parents[1])
    best: dict[str, dict[str, float]] = {"current": {}, "baseline": {}}
    passes: dict[str, dict[str, float]] = {"current": {}, "baseline": {}}
    for _ in range(rounds):
        for side, tree in (("current", here), ("baseline", baseline)):
            for kind, value in _rates(tree, problems, 1).items():
                target = passes if kind.endswith(" passes") else best
                target[side][kind] = max(target[side].get(kind, 0.0), value)
    print(f"graded programs/s, this checkout vs the baseline at {baseline} ({problems} problems x 4 programs):")
    for kind in best["current"]:
        now, then = best["current"][kind], best["baseline"][kind]
        print(f"  {kind:7s}: {now:6.1f}/s vs {then:6.1f}/s -> {now / then:.2f}x "
              f"(passes {passes['current'][kind + ' passes']:.0f} vs {passes['baseline'][kind + ' passes']:.0f})")  # fmt: skip
    total_now = len(best["current"]) / sum(1 / r for r in best["current"].values())
    total_then = len(best["baseline"]) / sum(1 / r for r in best["baseline"].values())
    print(f"  all kinds (harmonic mean): {total_now:.1f}/s vs {total_then:.1f}/s -> {total_now / total_then:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="math worker processes for the parallel figure")
    parser.add_argument("--items", type=int, default=192, help="distinct (gold, answer) pairs per math timing")
    parser.add_argument("--rounds", type=int, default=5, help="timings per figure (the best is kept)")
    parser.add_argument("--runs", type=int, default=40, help="sandbox runs per timing")
    parser.add_argument("--backends", default="bwrap,landlock,remote", help="isolated backends to time (runs/s)")
    parser.add_argument("--code_problems", type=int, default=40, help="HumanEval-style problems, code grading")
    parser.add_argument(
        "--baseline",
        default=None,
        help="a checkout of older trl_ext code (e.g. `git worktree add /tmp/base <commit>`): print only math "
        "verifications/s and graded programs/s of this checkout against it, measured in this run",
    )
    parser.add_argument("--math_only", action="store_true", help="with --baseline: the math comparison only")
    parser.add_argument("--mixes", default=",".join(MIXES), help="math mixes to time (comma-separated)")
    parser.add_argument("--math_rates_json", action="store_true", help=argparse.SUPPRESS)  # used by --baseline
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.math_rates_json:
        print_math_rates_json(args.workers, args.items, args.mixes.split(","))
        return
    if args.baseline:
        compare_math_with_baseline(args.baseline, args.workers, args.items, args.rounds, args.mixes.split(","))
        if not args.math_only:
            compare_with_baseline(args.baseline, args.code_problems, args.rounds)
        return

    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPU cores, load average {load:.2f}, python {sys.version.split()[0]}")
    for mix in args.mixes.split(","):
        single, multi, busy = bench_math(args.workers, args.items, args.rounds, mix)
        print(f"math verifications/s ({mix} mix), 1 worker:  {single:8.1f}")
        print(f"math verifications/s ({mix} mix), {args.workers} workers: {multi:8.1f}   ({multi / single:.2f}x)")
        print(f"  workers busy on average during that timing: {busy:.2f} (the CPU cores the machine gave them)")

    bare, bare_is, boxed, throughput = bench_sandbox(args.runs)
    print(f"bare `python -c pass` subprocess:       {bare * 1000:7.1f} ms (median of {args.runs})")
    print(f"bare `python -I -S -c pass` subprocess: {bare_is * 1000:7.1f} ms (the sandbox's interpreter flags)")
    print(f"sandbox run of `pass` (bwrap):          {boxed * 1000:7.1f} ms")
    print(
        f"sandbox overhead per run: {1000 * (boxed - bare):+.1f} ms vs `python -c pass`, {1000 * (boxed - bare_is):+.1f} ms vs the same flags"
    )
    print(f"sandbox runs/s, {os.cpu_count()} concurrent: {throughput:.1f}")
    backends = bench_backends(args.backends.split(","), args.runs)
    base = backends.get("bwrap", next(iter(backends.values())))[1]
    for name, (latency, rate) in backends.items():
        print(
            f"backend {name:8s}: {latency * 1000:7.1f} ms per run of `pass`, {rate:6.1f} runs/s with "
            f"{os.cpu_count()} concurrent ({rate / base:.2f}x bwrap)"
        )
    per_case = bench_stdio_cases(20, args.rounds)
    print(f"stdio test cases/s, one 20-case problem in one sandbox: {per_case:.1f}")
    for concurrency in (os.cpu_count() or 1, 2 * (os.cpu_count() or 1)):  # 2x: CodeTests' default workers
        print_code_grading(args.code_problems, args.rounds, concurrency)
    print(f"load average now {os.getloadavg()[0]:.2f} (shared machines skew every figure above)")


if __name__ == "__main__":
    main()
