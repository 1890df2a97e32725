"""Run a program against a test spec (stdio, call or assert) and grade it outside the sandbox."""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
from collections.abc import Callable
from typing import Any

from trl_ext.sandbox._process import Progress, RunResult
from trl_ext.sandbox.backends import get_backend
from trl_ext.sandbox.comparison import call_records, compare_stdio, decode_value, values_equal
from trl_ext.sandbox.limits import Limits

TEST_KINDS = ("stdio", "call", "assert")


@dataclasses.dataclass
class TestReport:
    """Result of grading one program: ``passed`` of ``total`` cases; ``infra_error`` when the sandbox itself
    failed (the program was not judged); ``statuses`` holds the status of every run made."""

    __test__ = False  # not a pytest class

    passed: int
    total: int
    infra_error: bool = False
    statuses: list[str] = dataclasses.field(default_factory=list)

    @property
    def all_passed(self) -> bool:
        return not self.infra_error and self.total > 0 and self.passed == self.total


def _need(spec: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in spec or not isinstance(spec[key], kind):
        raise ValueError(
            f"{where}: `{key}` is missing or not a {getattr(kind, '__name__', kind)} (got {spec.get(key)!r:.80})."
        )
    return spec[key]


def parse_tests(tests: dict | str, where: str = "tests") -> dict:
    """Validate a test spec (a dict or its JSON string) and return it as a dict.

    Accepted: ``{"kind": "stdio", "cases": [{"input": str, "output": str}, ...]}``,
    ``{"kind": "call", "fn_name": str, "cases": [{"args": [...], "expected": <json value>}, ...]}``,
    ``{"kind": "assert", "code": str, "entry_point": str (optional, HumanEval's check(candidate))}``.
    ``where`` names the row in error messages.
    """
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as exc:
            raise ValueError(f"{where}: the `tests` string is not valid JSON ({exc}).") from None
    if not isinstance(tests, dict):
        raise ValueError(f"{where}: `tests` must be a dict or a JSON object string, got {type(tests).__name__}.")
    kind = tests.get("kind")
    if kind not in TEST_KINDS:
        raise ValueError(f"{where}: `tests['kind']` must be one of {TEST_KINDS}, got {kind!r}.")
    if kind == "assert":
        _need(tests, "code", str, where)
        return tests
    cases = _need(tests, "cases", list, where)
    if not cases:
        raise ValueError(f"{where}: `tests['cases']` is empty; give at least one case.")
    if kind == "call":
        _need(tests, "fn_name", str, where)
    for i, case in enumerate(cases):
        case_where = f"{where}, case {i}"
        if not isinstance(case, dict):
            raise ValueError(f"{case_where}: each case must be a dict, got {type(case).__name__}.")
        if kind == "stdio":
            _need(case, "input", str, case_where)
            _need(case, "output", str, case_where)
        else:
            _need(case, "args", list, case_where)
            if "expected" not in case:
                raise ValueError(f"{case_where}: `expected` is missing.")
    return tests


def run_tests(
    program: str,
    tests: dict | str,
    *,
    limits: Limits | None = None,
    backend: str = "bwrap",
    stop_on_failure: bool = True,
    float_tol: float | None = None,
) -> TestReport:
    """Run ``program`` against ``tests`` in the sandbox; every comparison happens here, in the parent.

    stdio: one sandbox for all cases; the harness runs the program on each input in a fresh fork of itself
    (nothing of one case survives into the next) and returns the raw output, compared here with
    ``compare_stdio``. call: one process, the harness calls the function on each case and returns strictly
    typed JSON (``values_equal``). Both give every case ``limits.timeout_s`` and are graded as the cases
    finish, so ``stop_on_failure`` (binary rewards) ends the run at the first failing case. assert: one run
    that must print a per-run secret nonce after the asserts, so exiting early (``sys.exit(0)``,
    ``os._exit(0)``, atexit) cannot pass.
    """
    spec = parse_tests(tests)
    limits = limits or Limits()
    runner = get_backend(backend)
    if spec["kind"] == "stdio":
        return _run_stdio(runner, program, spec, limits, stop_on_failure, float_tol)
    if spec["kind"] == "call":
        return _run_call(runner, program, spec, limits, stop_on_failure, float_tol)
    return _run_assert(runner, program, spec, limits)


class _StreamingGrader:
    """Grades the per-case records of a stdio or call run as they arrive (``Progress.stop``), so that a
    binary reward stops the run at the first failing case instead of running the rest."""

    def __init__(self, marker: str, check: Callable[[int, dict], bool], stop_on_failure: bool) -> None:
        self.marker, self.check, self.stop_on_failure = marker, check, stop_on_failure
        self.results: dict[int, bool] = {}
        self.records: dict[int, dict] = {}

    def feed(self, stdout: bytes) -> bool:
        """Grade every complete new record; True when the run can stop (a case failed in binary mode)."""
        complete = stdout[: stdout.rfind(b"\n") + 1].decode("utf-8", errors="replace")
        for index, record in call_records(complete, self.marker).items():
            if index not in self.results:
                self.records[index] = record
                self.results[index] = self.check(index, record)
        return self.stop_on_failure and not all(self.results.values())

    def report(self, result: RunResult, total: int, statuses: list[str]) -> TestReport:
        self.feed(result.stdout.encode())
        report = TestReport(passed=sum(self.results.values()), total=total, statuses=statuses)
        report.infra_error = result.status == "infra_error"
        if report.infra_error:
            report.passed = 0
        return report


def _launch_streaming(runner, payload, limits, n_cases, grader, step_slack_s=0.0, max_output=None) -> RunResult:
    """One run for all cases: each case gets ``limits.timeout_s`` (plus slack for the harness's own work)."""
    run_limits = dataclasses.replace(
        limits,
        timeout_s=(limits.timeout_s + step_slack_s) * n_cases,
        max_output_bytes=max_output or limits.max_output_bytes,
    )
    progress = Progress(payload["marker"].encode(), limits.timeout_s + step_slack_s, grader.feed)
    return runner.launch(payload, b"", run_limits, progress=progress)


def _run_stdio(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    cases = spec["cases"]

    def check(index: int, record: dict) -> bool:
        if index >= len(cases) or record.get("status") != "ok":
            return False
        try:
            output = base64.b64decode(record.get("out", ""), validate=True).decode("utf-8", errors="replace")
        except ValueError:
            return False
        return compare_stdio(output, cases[index]["output"], float_tol)

    marker = f"@@trl-ext-{secrets.token_hex(8)}@@"
    payload = {
        "mode": "stdio",
        "code": program,
        "inputs": [case["input"] for case in cases],
        "marker": marker,
        "case_timeout": limits.timeout_s,
        "max_output": limits.max_output_bytes,
        "stop_on_failure": stop_on_failure,
        "kill_all": runner.name == "bwrap",  # a private pid namespace: safe to kill every process in it
    }
    grader = _StreamingGrader(marker, check, stop_on_failure)
    max_output = len(cases) * (limits.max_output_bytes * 4 // 3 + 256) + 4096  # base64 records
    result = _launch_streaming(runner, payload, limits, len(cases), grader, step_slack_s=1.0, max_output=max_output)
    grader.feed(result.stdout.encode())
    statuses = [grader.records[i].get("status", "runtime_error") for i in sorted(grader.records)]
    if result.status in ("infra_error", "output_limit") or not statuses:
        statuses.append(result.status)
    return grader.report(result, len(cases), statuses)


def _run_call(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    cases = spec["cases"]

    def check(index: int, record: dict) -> bool:
        if index >= len(cases) or record.get("ok") is not True or "value" not in record:
            return False
        try:
            return values_equal(decode_value(record["value"]), cases[index]["expected"], float_tol)
        except ValueError:
            return False

    marker = f"@@trl-ext-{secrets.token_hex(8)}@@"
    payload = {
        "mode": "call",
        "code": program,
        "fn_name": spec["fn_name"],
        "args": [case["args"] for case in cases],
        "marker": marker,
        "stop_on_failure": stop_on_failure,
    }
    grader = _StreamingGrader(marker, check, stop_on_failure)
    result = _launch_streaming(runner, payload, limits, len(cases), grader)
    return grader.report(result, len(cases), [result.status])


def _run_assert(runner, program, spec, limits) -> TestReport:
    nonce = secrets.token_hex(16)
    payload = {"mode": "assert", "code": program, "tests": spec["code"], "entry_point": spec.get("entry_point")}
    result = runner.launch(payload, b"", limits, nonce=nonce.encode())
    report = TestReport(passed=0, total=1, statuses=[result.status])
    if result.status == "infra_error":
        report.infra_error = True
    elif result.status == "ok" and nonce in result.stdout.splitlines():
        report.passed = 1
    return report
