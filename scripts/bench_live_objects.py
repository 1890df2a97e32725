"""Cost of the live objects of assert tests (docs/sandbox.md, class 9): tests that make many calls, keep one big
argument across calls, or take items from the program's generators, graded with ``run_tests`` on one backend.

    OMP_NUM_THREADS=1 python scripts/bench_live_objects.py [--baseline /tmp/base] [--rounds 3]

Prints, per case, the seconds one grading takes (best of ``--rounds``), the sandbox runs it needed and whether it
passed; with ``--baseline`` (a checkout of older trl_ext code) the same for that code, measured in this run, and
the ratio (this checkout's time over the baseline's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROGRAM = "def f(a):\n    return sum(a)\ndef g(i):\n    return i\ndef gen(n):\n    yield from range(n)\n"
CASES = {
    "1000 calls, fresh lists": "for i in range(1000):\n    assert f([i] * 10) == i * 10",
    "2000 calls, ints": "for i in range(2000):\n    assert g(i) == i",
    "one list kept, 1000 calls": "x = list(range(1000))\nfor i in range(1000):\n    assert f(x) == 499500",
    "a generator of 1000 items": "assert list(gen(1000)) == list(range(1000))",
    "10 generator asserts": "\n".join(f"assert list(gen({i})) == list(range({i}))" for i in range(10)),
}
_MEASURE = """
import json, sys, time
from trl_ext.sandbox import Limits, run_tests
program, cases, rounds = json.loads(sys.argv[1])
out = {}
for name, test in cases.items():
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        report = run_tests(program, {"kind": "assert", "code": test}, limits=Limits(timeout_s=20))
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    out[name] = [best, len(report.statuses), report.passed]
print(json.dumps(out))
"""


def measure(checkout: str, rounds: int) -> dict:
    """{case: [seconds, sandbox runs, passed]} with the trl_ext of ``checkout``, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": checkout, "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", _MEASURE, json.dumps([PROGRAM, CASES, rounds])]
    done = subprocess.run(argv, env=env, cwd=checkout, capture_output=True, text=True, check=True)  # cwd: its own
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="a checkout of older trl_ext code, measured in this run")
    parser.add_argument("--rounds", type=int, default=3, help="gradings per case (the best is kept)")
    args = parser.parse_args()
    here = measure(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), args.rounds)
    base = measure(args.baseline, args.rounds) if args.baseline else {}
    for name, (took, runs, passed) in here.items():
        line = f"  {name:28s}: {took:6.2f} s, {runs} runs, passed {passed}"
        if name in base:
            b_took, b_runs, b_passed = base[name]
            line += f" vs {b_took:6.2f} s, {b_runs} runs, passed {b_passed} -> {took / b_took:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
