"""The remote backend's two protocols grade alike: the SandboxFusion program (a bootstrap relaying the harness)
that any service runs, and ``sandbox-serve``'s own ``trl_ext_payload`` extension (the harness payload run as a
local run). The extension is used only where the service names the same harness; its fields are checked (400
naming the field) and the ones a local backend sets itself are the service's."""

from __future__ import annotations

import json
import os
import random

import pytest

from trl_ext.sandbox import Limits, run, run_tests
from trl_ext.sandbox import remote as remote_module
from trl_ext.sandbox.base import harness_digest
from trl_ext.sandbox.native_payload import FIELD
from trl_ext.sandbox.remote import RemoteBackend

from ._serve import post, serving

_RIGHT = "def add(a, b):\n    return a + b\n"
_CALL = {"kind": "call", "fn_name": "add", "cases": [{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}]}
_STDIO = {"kind": "stdio", "cases": [{"input": "3\n", "output": "6\n"}, {"input": "5\n", "output": "10\n"}]}
_ASSERT = {"kind": "assert", "code": "assert add(1, 2) == 3\nassert add(add(1, 1), 2) == 4\n"}
_LOOP_ON_SECOND = "def add(a, b):\n    while a == 2:\n        pass\n    return a + b\n"
_THREADS = "import threading, time\ndef add(a, b):\n    for _ in range(8):\n        threading.Thread(target=time.sleep, args=(0.5,)).start()\n    return a + b\n"
_GRADED = [
    (_RIGHT, _CALL, {}),
    ("def add(a, b):\n    return 3\n", _CALL, {}),
    (_LOOP_ON_SECOND, _CALL, {"stop_on_failure": False}),
    ("print(int(input()) * 2)\n", _STDIO, {}),
    ("import sys\nsys.stdout.write('x' * 5000)\n", _STDIO, {}),
    ("print(int(input()) * 2)\nimport os\nos._exit(125)\n", _STDIO, {}),
    (_RIGHT, _ASSERT, {}),
    ("def add(a, b):\n    return a - b\n", _ASSERT, {}),
    (_THREADS, _CALL, {}),
]  # fmt: skip


@pytest.fixture(scope="module")
def url():
    with serving(workers=2) as address:
        yield address


def _report(report) -> tuple:
    return report.passed, report.total, report.infra_error, tuple(report.statuses)


def test_both_protocols_grade_alike(url):
    native, bootstrap = RemoteBackend(url), RemoteBackend(url, protocol="bootstrap")
    assert native.speaks_payload() and not bootstrap.speaks_payload()
    limits = Limits(timeout_s=1.0, max_output_bytes=4096, nproc=4)
    for program, spec, options in _GRADED:
        reports = [run_tests(program, spec, backend=b, limits=limits, **options) for b in (native, bootstrap)]
        assert _report(reports[0]) == _report(reports[1]), (program, reports)
        assert not reports[0].infra_error
    right = run_tests(_RIGHT, _CALL, backend=native, limits=limits)
    assert right.passed == 2
    looping = run_tests(_LOOP_ON_SECOND, _CALL, backend=native, limits=limits, stop_on_failure=False)
    assert looping.passed == 1 and "timeout" in looping.statuses
    assert run_tests(_THREADS, _CALL, backend=native, limits=limits).passed == 0  # the client's nproc=4 held
    if os.geteuid() == 0:  # a uid of its own: nproc counts only the run's threads
        assert run_tests(_THREADS, _CALL, backend=native, limits=Limits(nproc=64)).passed == 2


def test_plain_runs_alike(url):
    for code, stdin in (("print(input()[::-1])", "abc\n"), ("import os\nos._exit(125)", ""), ("1/0", "")):
        native, relayed = [run(code, stdin, backend=RemoteBackend(url, protocol=p)) for p in ("auto", "bootstrap")]
        assert (native.status, native.stdout) == (relayed.status, relayed.stdout)
        assert relayed.exit_code == {125: 1}.get(native.exit_code, native.exit_code)  # the relay's own 125
    assert native.status == "runtime_error"


def test_a_service_with_another_harness_gets_the_bootstrap(url, monkeypatch):
    monkeypatch.setattr(remote_module, "harness_digest", lambda: "another harness")
    backend = RemoteBackend(url)
    assert not backend.speaks_payload()
    assert run_tests(_RIGHT, _CALL, backend=backend).passed == 2  # through the SandboxFusion program


def _request(field: object, **extra) -> dict:
    return {"code": "", "language": "python", "run_timeout": 5, FIELD: field, **extra}


def _field(**changes) -> dict:
    payload = {"mode": "script", "code": "print('hi')"}
    return {"payload": payload, "nonce": None, "marker": None, "step_s": None, "limits": {}, **changes}


def test_bad_payload_fields_are_400_naming_the_field(url):
    bad = {
        "trl_ext_payload` must be an object": [1],
        "string `mode`": _field(payload={"code": "x"}),
        "payload`'s calls": _field(payload={"mode": "calls", "calls": "abc"}),
        ".nonce`": _field(nonce="***"),
        ".marker`": _field(marker="\u00e9" * 3, step_s=1),
        ".step_s`": _field(marker="@@m@@", step_s=-1),
        ".limits.nproc`": _field(limits={"nproc": 10**6}),
        ".limits.scratch_mb`": _field(limits={"scratch_mb": True}),
        ".limits` may only": _field(limits={"memory_mb": 1}),
        "must be an object with payload": {**_field(), "runtime": {}},
    }
    for name, field in bad.items():
        status, answer = post(url, _request(field))
        assert status == 400 and name in answer["detail"], (name, answer)
    status, answer = post(url, _request(_field(), files={"a.txt": "eA=="}))
    assert status == 400 and "files" in answer["detail"]


def test_the_service_sets_what_a_local_backend_sets(url):
    # a client's own runtime, uid, limits and kill_all are replaced by the service's
    forged = {"mode": "script", "code": "print('ran')", "uid": 0, "limits": {}, "kill_all": True}
    forged["runtime"] = {"source": "raise SystemExit(7)", "bytecode": "", "tag": "x"}
    status, answer = post(url, _request(_field(payload=forged)))
    assert status == 200, answer
    assert answer["run_result"]["stdout"] == "ran\n" and answer["run_result"]["trl_ext_status"] == "ok"
    status, answer = post(url, _request(_field(payload={"mode": "script", "code": "import os; print(os.getuid())"})))
    assert status == 200 and answer["run_result"]["stdout"].strip() != "0"


def test_health_names_the_harness(url):
    import urllib.request

    with urllib.request.urlopen(url + "/health", timeout=10) as reply:
        health = json.loads(reply.read())
    assert health[FIELD] == harness_digest() and len(harness_digest()) == 32


def test_payload_answers_are_read_totally():
    from trl_ext.sandbox.remote import payload_run_result

    from .test_remote_answers import _STATUSES, _answer
    from .test_server_hardening import _random_value

    limits, rng = Limits(max_output_bytes=10), random.Random(5)
    assert payload_run_result(_answer(trl_ext_status="memory"), limits, 1.0).status == "memory"
    assert payload_run_result(_answer(trl_ext_status="ok", stdout="x" * 11), limits, 1.0).status == "output_limit"
    for no_status in (_answer(), _answer(trl_ext_status="infra_error"), _answer(trl_ext_status=["ok"])):
        assert payload_run_result(no_status, limits, 1.0).status == "infra_error"
    for _ in range(5000):
        answer = _random_value(rng)
        if rng.random() < 0.5:
            answer = _answer(**{key: _random_value(rng) for key in rng.sample(["stdout", "trl_ext_status", "x"], 2)})
        assert payload_run_result(answer, limits, 1.0).status in _STATUSES
