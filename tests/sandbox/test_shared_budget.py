"""Process budgets as a REAL non-root uid where runs cannot have a user namespace of their own (forced off here, as
in a container without them), and admission where they can (``trl_ext/sandbox/admission.py``). Every run then
has the uid-wide ceiling as its RLIMIT_NPROC and its watcher kills it past ``nproc`` tasks; a run whose thread or
process a sibling's burst refused, and that failed, is run once more alone; a trainer with a small ``ulimit -u``
admits only as many runs as the ceiling holds. Scripts run under ``setpriv`` (``_report_as_uid``), landlock per
run ("0") and through its fork server ("1")."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from tests.sandbox.test_process_budgets import _report_as_uid
from trl_ext.sandbox import Limits
from trl_ext.sandbox.limits import _uids_with_processes

pytestmark = pytest.mark.xdist_group("shared-budget")  # the real-uid scenarios, one at a time on one worker


def _idle_uid() -> int:
    """A uid no process runs as now, drawn per launch (below the sandbox's own uids, from 61000): RLIMIT_NPROC and
    the admission count every task of the uid, so two launches (two pytest sessions on one host) must not share
    one."""
    busy = _uids_with_processes()
    return random.SystemRandom().choice([uid for uid in range(20000, 60000) if uid not in busy])


needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
    reason="needs root, unshare and setpriv (util-linux) to become an unprivileged uid",
)

PRELUDE = r"""
import json, os, resource, sys, threading, time
from trl_ext.sandbox import Limits, admission, forkserver, run, run_tests, userns
if sys.argv[1] == "off":  # no user namespace per run, as where none can be created
    userns.available = userns.wanted = lambda: False
report = {"userns": True}
"""

WITHOUT_NAMESPACES = (  # two scenarios in one launch, one after the other
    PRELUDE
    + r'''
import logging
base = admission.uid_tasks()
warnings = []
logging.getLogger("trl_ext.sandbox").addHandler(logging.Handler())
logging.getLogger("trl_ext.sandbox").handlers[-1].emit = lambda record: warnings.append(record.getMessage())
os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = "1"
HOG = "import os, time\ntime.sleep(0.5)\nkids = 0\nwhile kids < 64:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(4)\n        os._exit(0)\n    kids += 1\nprint(kids, flush=True)\ntime.sleep(3)"
RIGHT = "import threading, time\ntime.sleep(1.5)\ndef f(x):\n    out = []\n    t = threading.Thread(target=out.append, args=(x,)); t.start(); t.join()\n    return out[0] * 2"
SPEC = {"kind": "call", "fn_name": "f", "cases": [{"args": [3], "expected": 6}]}
limits = Limits(timeout_s=12.0, nproc=16)
got = {}
victim = threading.Thread(target=lambda: got.setdefault("v", run_tests(RIGHT, SPEC, limits=limits, backend="bwrap")))
victim.start()
time.sleep(0.2)
hog = run(HOG, limits=limits, backend="bwrap")
victim.join()
run("pass", limits=limits, backend="bwrap")
report["got"] = [got["v"].passed, hog.status, hog.stdout.strip()]
report["sharing"] = sum("would share one process budget" in w for w in warnings)
forkserver.close_all()
deadline = time.monotonic() + 30
while admission.uid_tasks() > base + 2 and time.monotonic() < deadline:  # the first scenario's tasks are gone
    time.sleep(0.05)
HOG = """
import os, time
kids = []
for _ in range(12):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print(len(kids), flush=True)
time.sleep(2)
"""
VICTIM = "import threading, time\ntime.sleep(0.6)\nout = []\nt = threading.Thread(target=out.append, args=(1,)); t.start(); t.join()\nprint(out)"
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    limits = Limits(timeout_s=10.0, nproc=8)
    got = {}
    victim = threading.Thread(target=lambda: got.setdefault("v", run(VICTIM, limits=limits, backend="landlock")))
    victim.start()
    time.sleep(0.1)
    hog = run(HOG, limits=limits, backend="landlock")
    victim.join()
    report[fork] = [hog.status, got["v"].status, got["v"].stdout.strip()]
print(json.dumps(report))
'''
)


@pytest.fixture(scope="module")
def without_namespaces() -> dict:
    return _report_as_uid(_idle_uid(), WITHOUT_NAMESPACES, "off")


@needs_setpriv
def test_without_a_namespace_a_hog_is_killed_past_nproc_and_its_sibling_passes(without_namespaces):
    """The hog's RLIMIT_NPROC is the uid-wide ceiling, not "the uid's tasks now + nproc": it forks past its own
    ``nproc`` and its watcher kills it (a failure of its own); the sibling launched just before it starts its
    thread (before: "can't start new thread", score 0)."""
    report = {fork: without_namespaces[fork] for fork in ("0", "1")}
    assert report == {"0": ["runtime_error", "ok", "[1]"], "1": ["runtime_error", "ok", "[1]"]}, without_namespaces


@needs_setpriv
def test_a_bubblewrap_fork_server_without_namespaces_per_child_is_not_used(without_namespaces):
    """Where the bubblewrap fork server's children get no user namespace of their own (forced off here), they
    would share one RLIMIT_NPROC in the server's namespace and the refused flag would stay in their tmpfs (red team
    round 8, R2: a hog took a right sibling's thread, no rerun). Its runs go through a bubblewrap sandbox each
    instead, logged once: the hog gets a budget of its own and the right sibling passes."""
    report = without_namespaces
    passed, hog_status, hog_children = report["got"]
    assert passed == 1 and hog_status == "ok" and report["sharing"] == 1, report
    assert int(hog_children) >= 16 - 2, report  # its own budget (bubblewrap's init counts there; shared: 7)


RERUN = (
    PRELUDE
    + r'''
limit = admission.uid_tasks() + 100  # a trainer's `ulimit -u`: the runs' ceiling is a quarter below it
resource.setrlimit(resource.RLIMIT_NPROC, (limit, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
SCRIPT = "import threading, time\ntime.sleep(0.6)\nt = threading.Thread(target=print, args=(1,)); t.start(); t.join()"
CALL = "import threading, time\ntime.sleep(0.6)\ndef f(x):\n    out = []\n    t = threading.Thread(target=out.append, args=(x,)); t.start(); t.join()\n    return out[0] * 2"
SPEC = {"kind": "call", "fn_name": "f", "cases": [{"args": [3], "expected": 6}]}
FORGED_WRONG = "open('.trl-ext-refused', 'w').close()\ndef f(x):\n    return 0"
FORGED_RIGHT = "open('.trl-ext-refused', 'w').close()\ndef f(x):\n    return x * 2"
FORGED_SCRIPT = "open('.trl-ext-refused', 'w').close()\nraise SystemExit(3)"
decide_rerun = admission._count_rerun
burst = {}


def lift_burst_then_count_rerun():
    """The rerun is decided: the sibling's burst ends, and is gone, before the rerun starts (no clock involved)."""
    if "lift" in burst:
        burst.pop("lift")()
    decide_rerun()


admission._count_rerun = lift_burst_then_count_rerun


def starved(grade):
    """``grade()`` while the uid's tasks sit above the runs' ceiling (a sibling's burst, played by this trainer's
    threads, which its own higher limit allows) from before the run starts until the rerun alone is decided (or
    ``grade()`` returns without one). Returns whether the burst was in place, and the verdict."""
    release, filled, fillers = threading.Event(), threading.Event(), []

    def fill():  # kept above the ceiling (the trainer's own tasks come and go) until released
        while not release.is_set():
            missing = admission.ceiling() + 6 - admission.uid_tasks()  # a /proc scan: slow on a busy host
            for _ in range(missing):
                fillers.append(threading.Thread(target=release.wait))
                fillers[-1].start()
            if missing <= 0:
                filled.set()
                release.wait(0.005)

    def lift():
        release.set()
        filler.join()
        for t in fillers:
            t.join()
        deadline = time.monotonic() + 30
        while admission.uid_tasks() >= admission.ceiling() and time.monotonic() < deadline:
            time.sleep(0.01)  # a joined thread's task may linger a moment

    filler = threading.Thread(target=fill)
    filler.start()
    burst["lift"] = lift
    in_place = filled.wait(120)
    result = grade()
    if "lift" in burst:  # no rerun was decided
        burst.pop("lift")()
    return in_place, result


for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    limits = Limits(timeout_s=10.0, nproc=8)
    got = []
    run("pass", limits=limits, backend="landlock")  # the fork server and its spares: part of the uid's base
    for grade in (
        lambda: run(SCRIPT, limits=limits, backend="landlock"),
        lambda: run_tests(CALL, SPEC, limits=limits, backend="landlock"),
    ):
        before = admission.reruns()
        filled, result = starved(grade)
        verdict = [result.status, result.stdout.strip()] if hasattr(result, "stdout") else result.passed
        got.append([filled, verdict, admission.reruns() - before])
    for program in (FORGED_WRONG, FORGED_RIGHT):
        before = admission.reruns()
        got.append([run_tests(program, SPEC, limits=limits, backend="landlock").passed, admission.reruns() - before])
    before = admission.reruns()
    got.append([run(FORGED_SCRIPT, limits=limits, backend="landlock").exit_code, admission.reruns() - before])
    report[fork] = got
    forkserver.close_all()
print(json.dumps(report))
'''
)


@needs_setpriv
def test_a_starved_run_is_run_again_alone_and_a_forged_flag_buys_no_rerun():
    """Without a namespace: a right program whose thread was refused while the uid's tasks sat at the ceiling
    (a script run, and a call test graded by the judge) is run once more alone and passes; a program that
    writes the harness's flag itself while the trainer saw no contention gets no rerun (before: one rerun alone,
    a second draw for a guessing program) and the verdict it earns (0 stays 0; a pass needs none)."""
    report = _report_as_uid(_idle_uid(), RERUN, "off")
    for fork, (script, call, forged_wrong, forged_right, forged_script) in report.items():
        assert script == [True, ["ok", "1"], 1], (fork, report)
        assert call == [True, 1, 1], (fork, report)
        assert forged_wrong == [0, 0] and forged_right == [1, 0] and forged_script == [3, 0], (fork, report)


BATCH = (
    PRELUDE
    + r"""
import ctypes
# the trainer as a child subreaper, as under an init that reaps (docs/sandbox.md, 'Known limits'): the first round's
# killed fork bombs come back to it and are reaped, instead of holding the uid's budget as zombies of a late init
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
limit = admission.uid_tasks() + 100
resource.setrlimit(resource.RLIMIT_NPROC, (limit, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
HOG = "import os, time\nn = 0\nwhile n < 200:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\ntime.sleep(1)\ndef f(x):\n    return 0"
RIGHT = "import threading\ndef f(x):\n    out = []\n    t = threading.Thread(target=out.append, args=(x,)); t.start(); t.join()\n    return out[0] * 2"
SPEC = {"kind": "call", "fn_name": "f", "cases": [{"args": [3], "expected": 6}]}
for fork in ("0", "1"):
    os.environ["TRL_EXT_SANDBOX_FORKSERVER"] = fork
    limits = Limits(timeout_s=10.0, nproc=16)
    run("pass", limits=limits, backend="landlock")  # the fork server and its spares: part of the uid's base
    passed = {}
    def grade(i, program):
        passed[i] = run_tests(program, SPEC, limits=limits, backend="landlock").passed
    batch = [threading.Thread(target=grade, args=(i, HOG if i % 2 else RIGHT)) for i in range(8)]
    for t in batch:
        t.start()
    time.sleep(1.0)
    trainer = []
    for _ in range(8):  # the trainer's own threads and a process, while the batch runs
        t = threading.Thread(target=time.sleep, args=(0.1,)); t.start(); trainer.append(t)
    import subprocess
    trainer_fork = subprocess.run(["true"]).returncode
    for t in batch + trainer:
        t.join()
    report[fork] = [[passed[i] for i in range(0, 8, 2)], trainer_fork, [passed[i] for i in range(1, 8, 2)]]
    forkserver.close_all()
print(json.dumps(report))
"""
)


@needs_setpriv
@pytest.mark.parametrize("namespace", ["on", "off"])
def test_a_batch_under_a_small_ulimit_admits_what_fits_and_every_right_program_passes(namespace):
    """A trainer limited to its tasks + 100 grades a batch of 8 programs (4 forking until refused, 4 right ones
    that start a thread) with ``nproc`` 16: together they would pass the runs' ceiling (before: the last runs could
    not start a thread, right program 0). Admitted as the ceiling holds, every right program passes and the
    trainer still starts its threads and a process."""
    report = _report_as_uid(_idle_uid(), BATCH, namespace)
    for fork, (rights, trainer_fork, _) in report.items():
        assert rights == [1, 1, 1, 1] and trainer_fork == 0, (fork, namespace, report)


def test_admission_admits_what_fits_and_a_run_alone_excludes_every_other(monkeypatch):
    """The gate in process: with room for two runs of ``nproc`` 8, a third waits until one leaves; a run alone
    waits for the runs in flight and keeps every other out while it runs; a run larger than the room is still
    admitted when nothing else runs (it never waits for ever)."""
    import threading

    from trl_ext.sandbox import admission

    gate = admission._Gate()
    monkeypatch.setattr(admission, "ceiling", lambda: 20)
    monkeypatch.setattr(admission, "uid_tasks", lambda: 4)  # room 16
    order: list[str] = []
    first, second = gate.admitted(8), gate.admitted(8)
    first.__enter__()
    second.__enter__()

    def enter(name: str, nproc: int, alone: bool = False) -> threading.Thread:
        def body() -> None:
            with gate.admitted(nproc, alone):
                order.append(name)

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    third = enter("third", 8)
    third.join(0.2)
    assert order == []  # 8 + 8 + 8 > 16
    first.__exit__(None, None, None)
    third.join(5)
    assert order == ["third"]
    lone = enter("alone", 8, alone=True)
    lone.join(0.2)
    assert order == ["third"]  # waits for the run still in flight
    fourth = enter("fourth", 4)  # arrives while a run alone waits: after it
    second.__exit__(None, None, None)
    lone.join(5)
    fourth.join(5)
    assert order == ["third", "alone", "fourth"]
    big = enter("big", 64)
    big.join(5)
    assert order[-1] == "big"


REFUSALS = r"""
import os, subprocess, sys, threading
flag = os.path.join(os.getcwd(), ".trl-ext-refused")
got = []
def check(start):
    try:
        start()
    except (OSError, RuntimeError) as exc:
        got.append([type(exc).__name__, os.path.exists(flag)])
        os.unlink(flag) if os.path.exists(flag) else None
    else:
        got.append("started")
check(lambda: threading.Thread(target=print).start())
check(lambda: os.fork() or os._exit(0))
check(lambda: subprocess.run(["true"]))  # _posixsubprocess, imported only now: wrapped on import
check(lambda: subprocess.run(["/no/such/binary"]))  # refused for another reason: no flag
print(got)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="as root each run has a uid of its own, limited to its nproc")
def test_the_harness_leaves_the_flag_when_a_thread_or_process_is_refused():
    """With ``nproc`` 1 the run's only task is the harness: a thread, a fork and a subprocess (whose module the
    program imports late) are refused, and each refusal leaves the flag the trainer reads; a failure for another
    reason (a missing binary, with room to fork) leaves none."""
    from trl_ext.sandbox import Limits, run

    result = run(REFUSALS, limits=Limits(timeout_s=10.0, nproc=1), backend="landlock")
    assert result.stdout.strip() == str(
        [["RuntimeError", True], ["BlockingIOError", True], ["BlockingIOError", True], ["BlockingIOError", True]]
    ), result.stderr[-500:]
    result = run(REFUSALS, limits=Limits(timeout_s=10.0, nproc=8), backend="landlock")
    assert result.stdout.strip() == "['started', 'started', 'started', ['FileNotFoundError', False]]", result.stderr


def test_a_fork_refused_for_a_moment_is_retried_and_one_refused_for_good_gives_none(monkeypatch):
    """The fork server's fork of a child (``_confinement._fork_retrying``): EAGAIN waits and retries; still refused
    after its tries, the request is given up (None), never an exception that ends the server."""
    from trl_ext.sandbox import _confinement

    calls = []

    def fork(fail: int) -> int:
        calls.append(1)
        if len(calls) <= fail:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return 4321

    monkeypatch.setattr(os, "fork", lambda: fork(2))
    assert _confinement._fork_retrying(tries=5, wait_s=0.001) == 4321 and len(calls) == 3
    calls.clear()
    monkeypatch.setattr(os, "fork", lambda: fork(99))
    assert _confinement._fork_retrying(tries=5, wait_s=0.001) is None and len(calls) == 5


def _flagged_failures(monkeypatch, tmp_path, during):
    """``admission.launch`` as a non-root trainer of a script run whose program leaves the refused flag and
    fails; ``during()`` runs inside each run. Returns how many times the run was launched."""
    from trl_ext.sandbox import admission
    from trl_ext.sandbox._process import RunResult

    monkeypatch.setattr(admission.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(admission, "ceiling", lambda: 100)
    monkeypatch.setattr(admission, "uid_tasks", lambda: 10)  # far below the ceiling: the poll sees nothing
    (tmp_path / admission.REFUSED_FLAG).touch()
    launches = []

    def run() -> RunResult:
        launches.append(1)
        during()
        admission.note_run(str(tmp_path))
        return RunResult("runtime_error", "", "RuntimeError: can't start new thread", 1, 0.1)

    result = admission.launch(run, Limits(nproc=8), {"mode": "script"}, None)
    assert result.status == "runtime_error"
    return len(launches)


def test_a_flag_without_contention_the_trainer_saw_gets_no_rerun(monkeypatch, tmp_path):
    """The flag is the program's own word: a failed run that left it while nothing the trainer saw could have
    refused it (no sibling killed past its cap, the uid's tasks below the ceiling) is not run again."""
    assert _flagged_failures(monkeypatch, tmp_path, lambda: None) == 1


def test_a_flag_with_a_sibling_killed_past_its_cap_during_the_run_gets_one_rerun(monkeypatch, tmp_path):
    """A sibling's watcher killing it past its ``tasks_cap`` while the run was in flight is the trainer's own
    evidence: the flagged failure is run once more (and only once: the rerun's verdict stands)."""
    from trl_ext.sandbox import admission

    assert _flagged_failures(monkeypatch, tmp_path, admission.note_contention) == 2


def test_the_uid_at_the_ceiling_when_a_flagged_run_ends_is_contention(monkeypatch, tmp_path):
    """The uid's tasks at the ceiling as the flagged run ends (a finished run's orphans not reaped yet, another
    process of the uid) count as contention the trainer saw."""
    from trl_ext.sandbox import admission

    def crowd() -> None:
        monkeypatch.setattr(admission, "uid_tasks", lambda: 100)

    assert _flagged_failures(monkeypatch, tmp_path, crowd) == 2


def test_admission_is_in_arrival_order_a_big_run_is_not_overtaken(monkeypatch):
    """A run that fits only in an empty gate, waiting behind runs in flight, holds back every later arrival
    (before: a stream of small runs overtook it for as long as it lasted)."""
    import threading

    from trl_ext.sandbox import admission

    gate = admission._Gate()
    monkeypatch.setattr(admission, "ceiling", lambda: 20)
    monkeypatch.setattr(admission, "uid_tasks", lambda: 4)  # room 16
    order: list[str] = []
    small = gate.admitted(4)
    small.__enter__()
    done = threading.Event()

    def enter(name: str, nproc: int) -> threading.Thread:
        def body() -> None:
            with gate.admitted(nproc):
                order.append(name)
                if name == "big":
                    done.wait(5)

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    big = enter("big", 16)
    big.join(0.2)
    later = enter("later", 4)  # would fit beside the small run: 4 + 4 <= 16
    later.join(0.2)
    assert order == []  # waits behind the big run
    small.__exit__(None, None, None)
    big.join(0.2)
    assert order == ["big"]  # the big run is in, alone in the room; the later one still waits
    done.set()
    big.join(5)
    later.join(5)
    assert order == ["big", "later"]


def test_the_room_is_shared_by_the_local_world_size(monkeypatch):
    """With ``LOCAL_WORLD_SIZE`` trainer processes on the host each admits within its share of the room; a bad
    value is named with the fix."""
    from trl_ext.sandbox import admission

    monkeypatch.setattr(admission, "ceiling", lambda: 68)
    monkeypatch.setattr(admission, "uid_tasks", lambda: 4)  # room 64
    for size, room in (("1", 64), ("4", 16)):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", size)
        gate = admission._Gate()
        gate._refresh()
        assert gate._room == room
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE='two'.*integer >= 1"):
        admission._Gate()._refresh()
