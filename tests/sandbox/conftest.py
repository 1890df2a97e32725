"""The backends the judge-side suites run on: the isolated ones of ``tests/_backends.py`` (bwrap, landlock,
remote -> ``sandbox-serve``) and the explicit ``rlimit`` backend, since judging must hold whatever executes the
program. ``TRL_EXT_TEST_BACKENDS`` narrows the list as for the other suites (e.g. landlock as uid 1000)."""

from __future__ import annotations

import os

import pytest

from tests._backends import BACKEND_ENV, ISOLATED, URL_ENV, sandbox_server  # noqa: F401 - fixture

JUDGE_BACKENDS = ISOLATED if "TRL_EXT_TEST_BACKENDS" in os.environ else (*ISOLATED, "rlimit")


@pytest.fixture(params=JUDGE_BACKENDS)
def backend(request, monkeypatch) -> str:
    """The backend name this test runs with (the default of every sandbox call in it)."""
    if request.param == "remote":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("sandbox_server"))
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param
