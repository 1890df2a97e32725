"""Run a program against a test spec (stdio, call or assert) and grade it outside the sandbox."""

from __future__ import annotations

import dataclasses
import json
import secrets
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

    stdio: one run per case, whole-output comparison (``compare_stdio``). call: one run, the harness calls the
    function on each case and returns strictly typed JSON (``values_equal``). assert: one run that must print
    a per-run secret nonce after the asserts, so exiting early (``sys.exit(0)``, ``os._exit(0)``, atexit)
    cannot pass. ``stop_on_failure`` stops at the first failing case (binary rewards).
    """
    spec = parse_tests(tests)
    limits = limits or Limits()
    runner = get_backend(backend)
    if spec["kind"] == "stdio":
        return _run_stdio(runner, program, spec, limits, stop_on_failure, float_tol)
    if spec["kind"] == "call":
        return _run_call(runner, program, spec, limits, stop_on_failure, float_tol)
    return _run_assert(runner, program, spec, limits)


def _run_stdio(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    report = TestReport(passed=0, total=len(spec["cases"]))
    for case in spec["cases"]:
        result = runner.launch({"mode": "script", "code": program}, case["input"].encode(), limits)
        report.statuses.append(result.status)
        if result.status == "infra_error":
            report.infra_error = True
            return report
        if result.status == "ok" and compare_stdio(result.stdout, case["output"], float_tol):
            report.passed += 1
        elif stop_on_failure:
            break
    return report


def _run_call(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    cases = spec["cases"]
    marker = f"@@trl-ext-{secrets.token_hex(8)}@@"
    payload = {
        "mode": "call",
        "code": program,
        "fn_name": spec["fn_name"],
        "args": [case["args"] for case in cases],
        "marker": marker,
        "stop_on_failure": stop_on_failure,
    }
    # one process for all cases: each case gets timeout_s (the harness reports every case as it finishes)
    run_limits = dataclasses.replace(limits, timeout_s=limits.timeout_s * len(cases))
    progress = Progress(marker.encode(), limits.timeout_s)
    result: RunResult = runner.launch(payload, b"", run_limits, progress=progress)
    report = TestReport(passed=0, total=len(cases), statuses=[result.status])
    if result.status == "infra_error":
        report.infra_error = True
        return report
    if result.status not in ("ok", "timeout"):
        return report  # a crash or limit breach after some cases still fails the program as a whole
    records = call_records(result.stdout, marker)
    for i, case in enumerate(cases):
        record = records.get(i)
        ok = record is not None and record.get("ok") is True and "value" in record
        try:
            ok = ok and values_equal(decode_value(record["value"]), case["expected"], float_tol)
        except ValueError:
            ok = False
        if ok:
            report.passed += 1
        elif stop_on_failure:
            break
    return report


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
