"""The remote backend reads any answer of an execution service without raising (docs/sandbox.md, class 11): a
well-formed SandboxFusion answer maps to the run's status, anything malformed is an infrastructure fault (None
reward), never a program's 0 and never an exception in the trainer."""

from __future__ import annotations

import json
import random

from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.remote import to_run_result

from .test_server_hardening import _random_value

_STATUSES = {"ok", "runtime_error", "timeout", "memory", "output_limit", "infra_error"}


def _answer(**run) -> dict:
    base = {"status": "Finished", "execution_time": 0.2, "return_code": 0, "stdout": "ready1\n", "stderr": ""}
    return {"status": "Success", "message": "", "compile_result": None, "run_result": {**base, **run}, "files": {}}


def test_sandboxfusion_answers_map_to_run_statuses():
    limits = Limits()
    assert to_run_result(_answer(), limits, 9.0).status == "ok"
    assert to_run_result(_answer(), limits, 9.0).wall_s == 0.2
    timeout = _answer(status="TimeLimitExceeded", return_code=None, stdout="ready")
    assert to_run_result({**timeout, "status": "Failed"}, limits, 1.0).status == "timeout"
    assert to_run_result(_answer(return_code=1, stderr="x"), limits, 1.0).status == "runtime_error"
    error = {**_answer(status="Error", return_code=None), "status": "SandboxError", "message": "bwrap failed"}
    assert to_run_result(error, limits, 1.0).status == "infra_error"


def test_malformed_answers_are_infra_errors_and_never_raise():
    limits, rng = Limits(), random.Random(11)
    malformed = [
        _answer(stdout=["ready"]),
        _answer(stderr={"a": 1}),
        _answer(return_code="0"),
        _answer(return_code=True),
        _answer(return_code=1.5),
        {"status": "SandboxError", "message": [[[]]], "run_result": None},
        json.loads("[" * 900 + "]" * 900),
        {"status": "Success", "run_result": json.loads('{"a":' * 900 + "1" + "}" * 900)},
        {"status": "SandboxError", "message": "", "run_result": json.loads("[" * 900 + "]" * 900)},
    ]
    for answer in malformed:
        assert to_run_result(answer, limits, 1.0).status == "infra_error", answer
    odd_time = to_run_result(_answer(execution_time="fast"), limits, 1.0)  # the run is fine; its timing is not
    assert (odd_time.status, odd_time.wall_s) == ("ok", 1.0)
    for _ in range(5000):  # generated answers: a run status always, an exception never
        answer = _random_value(rng)
        if rng.random() < 0.5:
            answer = _answer(**{key: _random_value(rng) for key in rng.sample(sorted(_answer()["run_result"]), 2)})
        assert to_run_result(answer, limits, 1.0).status in _STATUSES
