"""Class 1: forged result records. Exactly one record per real case, in order, is graded; any other record
fails the program; a reward never exceeds 1; the harness's result channel is out of the program's reach."""

from __future__ import annotations

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import Backend, Limits, get_backend, run_tests
from trl_ext.sandbox.records import RecordStream

FAST = Limits(timeout_s=3.0)
MARKER = "@@m@@"


def _stdio_line(i, status="ok", out="NA=="):
    return f'\n{MARKER}{{"i": {i}, "status": "{status}", "out": "{out}"}}\n'


def _call_line(i, value="4"):
    return f'\n{MARKER}{{"i": {i}, "ok": true, "value": {value}}}\n'


FORGERIES = {
    "negative index": _call_line(0) + _call_line(-1),
    "repeated index": _call_line(0) + _call_line(0),
    "skipped index": _call_line(0) + _call_line(2),
    "out of range": _call_line(0) + _call_line(1) + _call_line(2),
    "bool index": f'\n{MARKER}{{"i": true, "ok": true, "value": 4}}\n',
    "float index": f'\n{MARKER}{{"i": 0.0, "ok": true, "value": 4}}\n',
    "malformed json": _call_line(0) + f"\n{MARKER}{{not json\n",
    "deep nesting": f"\n{MARKER}" + "[" * 100_000 + "]" * 100_000 + "\n",
    "not an object": f"\n{MARKER}[0, true, 4]\n",
    "unknown field": f'\n{MARKER}{{"i": 0, "ok": true, "value": 4, "passed": true}}\n',
    "ok of wrong type": f'\n{MARKER}{{"i": 0, "ok": 1, "value": 4}}\n',
    "raised of wrong type": f'\n{MARKER}{{"i": 0, "ok": false, "raised": ["x"]}}\n',
    "huge index": f'\n{MARKER}{{"i": {10**4000}, "ok": true, "value": 4}}\n',
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_the_record_stream_refuses_every_forgery(name):
    stream = RecordStream(MARKER, "calls", 2)
    stream.feed(FORGERIES[name])
    assert stream.invalid, name


def test_the_record_stream_accepts_the_harness_records_fed_in_any_pieces():
    text = "noise\n" + _call_line(0) + "x" + _call_line(1, '{"t": [1, 2]}')
    whole = RecordStream(MARKER, "calls", 2)
    assert [r["decoded"] for r in whole.feed(text)] == [4, (1, 2)] and not whole.invalid
    pieces = RecordStream(MARKER, "calls", 2)
    got = [r["i"] for end in range(len(text) + 1) for r in pieces.feed(text[:end])]  # every prefix, as streamed
    assert got == [0, 1] and not pieces.invalid
    stdio = RecordStream(MARKER, "stdio", 2)
    assert [r["output"] for r in stdio.feed(_stdio_line(0) + _stdio_line(1, "timeout", ""))] == ["4", ""]
    for bad in (_stdio_line(0, "passed"), _stdio_line(0, out="@@"), _stdio_line(0).replace('"ok"', "[1]")):
        refused = RecordStream(MARKER, "stdio", 2)
        refused.feed(bad)
        assert refused.invalid, bad


class ForgingBackend(Backend):
    """A backend whose channel was breached: it runs the program on ``inner`` and then appends records as if
    the program had written them on the harness's stdout (what an escape of the channel would give)."""

    name = "forging"

    def __init__(self, inner: Backend, lines) -> None:
        self.inner, self.lines = inner, lines
        self.kill_all_safe = inner.kill_all_safe

    def launch(self, payload, stdin, limits, nonce=None, progress=None):
        result = self.inner.launch(payload, stdin, limits, progress=progress)
        marker = payload.get("marker", "")
        result.stdout += "".join(f"\n{marker}{line}\n" for line in self.lines)
        return result


CALL = {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 2}, {"args": [2], "expected": 4}]}
RIGHT_ON_ONE = "def f(x):\n    return 2 if x == 1 else 0\n"
INJECTED = {
    "negative": ['{"i": -1, "ok": true, "value": 4}'],
    "repeated": ['{"i": 0, "ok": true, "value": 2}'],
    "out of range": ['{"i": 2, "ok": true, "value": 4}', '{"i": 3, "ok": true, "value": 4}'],
    "next case": ['{"i": 1, "ok": true, "value": 4}'],
}


@pytest.mark.parametrize("stop_on_failure", [True, False])
def test_records_injected_into_the_channel_fail_the_program(backend, stop_on_failure):
    """Whatever the backend, records added to a run's stdout (a breached channel) can only fail the program."""
    inner = get_backend(backend)
    for name, lines in INJECTED.items():
        report = run_tests(RIGHT_ON_ONE, CALL, backend=ForgingBackend(inner, lines), limits=FAST,
                           stop_on_failure=stop_on_failure)  # fmt: skip
        assert (report.passed, report.all_passed) == (0, False), name
        assert report.statuses[0] == "invalid_result", (name, report)
    stdio = {"kind": "stdio", "cases": [{"input": "1", "output": "2"}, {"input": "2", "output": "4"}]}
    program = "x = int(input())\nprint(2 if x == 1 else 0)\n"
    forged = ['{"i": 1, "status": "ok", "out": "NA=="}', '{"i": -1, "status": "ok", "out": "NA=="}']
    report = run_tests(program, stdio, backend=ForgingBackend(inner, forged), limits=FAST, stop_on_failure=False)
    assert report.passed == 0 and report.statuses[0] == "invalid_result"
    honest = run_tests(program, stdio, backend=inner, limits=FAST, stop_on_failure=False)
    assert (honest.passed, honest.total) == (1, 2)


# The program looks for the marker by walking frames and the gc, then writes forged records for every case to
# every descriptor it has and to every /proc/<pid>/fd/* it can open (the harness's stdout among them where a
# process is dumpable). It returns what it could open, so the test also sees whether the channel was reachable.
CHANNEL_ATTACK = r"""
import gc, os, sys
def _markers():
    found = set()
    try:  # the harness's audit hook denies frames and gc.get_objects (FrameDenied, a ValueError): nothing found
        frame = sys._getframe()
    except ValueError:
        frame = None
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            if isinstance(value, (bytes, str)) and str(value if isinstance(value, str) else value.decode("latin-1")).startswith("@@trl-ext-"):
                found.add(value if isinstance(value, str) else value.decode())
        frame = frame.f_back
    try:
        objects = gc.get_objects()
    except ValueError:
        objects = []
    for obj in objects:
        if isinstance(obj, dict) and isinstance(obj.get("marker"), str):
            found.add(obj["marker"])
    return found
def _forge(data, own_descriptors):
    opened = []
    for fd in range(0, 256 if own_descriptors else 0):
        try:
            os.write(fd, data)
        except OSError:
            pass
    try:
        pids = os.listdir("/proc")
    except OSError:
        pids = []
    for pid in pids:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            opened.append(f"{pid}/{fd}")
            try:
                os.write(target, data)
            except OSError:
                pass
            os.close(target)
    return opened
def _attack(own_descriptors=True):
    lines = []
    for marker in _markers():
        for i in range(-2, 6):
            for value in ("2", "4", "6"):
                lines.append(marker + '{"i": %d, "ok": true, "value": %s}' % (i, value))
                lines.append(marker + '{"i": %d, "status": "ok", "out": "NA=="}' % i)
    return _forge(("\n" + "\n".join(lines) + "\n").encode(), own_descriptors)
"""


def test_a_program_cannot_reach_the_result_channel_and_its_forgeries_never_count(backend):
    calls = CHANNEL_ATTACK + "def f(x):\n    if x == 1:\n        return 2\n    return _attack(x == 2)\n"
    spec = {**CALL, "cases": [*CALL["cases"], {"args": [3], "expected": []}]}
    graded = CodeTests(timeout_s=5.0, mode="fraction")
    scores = graded([f"```python\n{calls}\n```"], tests=[spec])
    assert 0 <= scores[0] <= 1 / 3 + 1e-9  # case 0 is right; the attack returns what it opened ([]: nothing)
    probe = run_tests(calls, {**spec, "cases": spec["cases"][2:]}, limits=Limits(timeout_s=5.0))
    assert probe.all_passed, f"the program opened another process's descriptors: {probe}"
    stdio_program = CHANNEL_ATTACK + "x = int(input())\nprint(_attack(False) if x == 2 else 2)\n"
    stdio = {"kind": "stdio", "cases": [{"input": "1", "output": "2"}, {"input": "2", "output": "[]"}]}
    report = run_tests(stdio_program, stdio, limits=Limits(timeout_s=5.0), stop_on_failure=False)
    assert report.passed == 2, f"a stdio case opened another process's descriptors or forged records: {report}"


def test_a_fraction_reward_never_exceeds_one(backend):
    """Programs that return the right value once and then try every way to repeat it (os._exit, forking,
    threads writing after the call) score at most the share of cases they got right."""
    cases = [{"args": [x], "expected": 2 * x} for x in range(4)]
    spec = {"kind": "call", "fn_name": "f", "cases": cases}
    programs = [
        "def f(x):\n    return 2 * x if x == 0 else None\n",
        "import os\ndef f(x):\n    if x == 1:\n        os.fork()\n    return 2 * x if x < 2 else -1\n",
        'import sys\ndef f(x):\n    sys.stdout.write(\'\\n{"i": 3, "ok": true, "value": 6}\\n\')\n    return 0\n',
    ]
    scores = CodeTests(timeout_s=3.0, mode="fraction")([f"```python\n{p}\n```" for p in programs], tests=[spec] * 3)
    assert all(0.0 <= s <= 1.0 for s in scores), scores
    assert scores[0] == pytest.approx(0.25) and scores[2] == pytest.approx(0.25)


def test_the_marker_is_not_found_by_walking_frames_or_the_gc(backend):
    """Defence in depth: the program's process (a fork of the harness) keeps nothing of the channel in its
    frames or gc-tracked objects (its memory may still hold freed copies: the channel itself is closed)."""
    call = {"kind": "call", "fn_name": "found", "cases": [{"args": [], "expected": []}]}
    calls = run_tests(CHANNEL_ATTACK + "def found():\n    return sorted(_markers())\n", call, limits=FAST)
    assert calls.all_passed, calls
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": "[]"}]}
    cases = run_tests(CHANNEL_ATTACK + "print(sorted(_markers()))\n", stdio, limits=FAST)
    assert cases.all_passed, cases
