"""Programs and their assert tests graded through ``CodeTests`` on one launch: a backend and whether it uses its
fork server. The tests of the judge's exactness (exception and iterator classes, library values) grade the same
way on every launch they name."""

from __future__ import annotations

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import forkserver, get_backend
from trl_ext.sandbox.backends import BACKEND_ENV, URL_ENV


def grade_asserts(
    launch: tuple[str, str], sources: list[str], tests: list[str], monkeypatch, request=None
) -> tuple[list[float], dict[str, float]]:
    """Score ``sources[i]`` against the assert test ``tests[i]`` (binary) on ``launch`` = (backend, "0" or "1" for
    the fork server); "remote" needs pytest's ``request`` for the session's ``sandbox-serve``. Returns the scores
    and the logged outcomes."""
    backend, fork = launch
    if backend == "landlock" and fork == "1" and not forkserver.supported():
        pytest.fail("this kernel lacks Landlock ABI >= 6: fork servers are not used here")
    if backend == "remote":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("sandbox_server"))
    monkeypatch.setenv(BACKEND_ENV, backend)
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, fork)
    get_backend(backend)  # raises SandboxUnavailable where the backend cannot run
    outcomes: dict[str, float] = {}
    programs = [f"```python\n{source}\n```" for source in sources]
    reward = CodeTests(timeout_s=10.0, mode="binary")
    scores = reward(programs, tests=[{"kind": "assert", "code": t} for t in tests], log_metric=outcomes.__setitem__)
    return scores, outcomes


def assert_wrong_fail_right_pass(
    launch: tuple[str, str], program: str, wrong: list[str], right: list[str], monkeypatch, request=None
) -> None:
    """``program`` graded against each test of ``wrong`` (CPython fails them: 0) and ``right`` (CPython passes them:
    1) on ``launch``, with no test refused and no infrastructure error."""
    tests = wrong + right
    scores, outcomes = grade_asserts(launch, [program] * len(tests), tests, monkeypatch, request)
    assert scores == [0.0] * len(wrong) + [1.0] * len(right), list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0 and outcomes["code_tests/unsupported_test"] == 0.0
