"""Run a program against a test spec (stdio, call or assert) and grade it outside the sandbox."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable

from trl_ext.sandbox import admission, replay
from trl_ext.sandbox._process import Progress, RunResult
from trl_ext.sandbox.assert_plan import _AST_LOCK, program_refusal, refuse_shadowed, unsupported_plan, watched_modules
from trl_ext.sandbox.backends import Backend, get_backend
from trl_ext.sandbox.base import harness_runtime
from trl_ext.sandbox.comparison import compare_stdio, values_equal
from trl_ext.sandbox.eval_worker import evaluation_pool
from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.program_exceptions import _free_reads
from trl_ext.sandbox.program_source import program_facts
from trl_ext.sandbox.records import RERUN_DETAIL, RecordStream, RunHistory
from trl_ext.sandbox.test_specs import _assert_plan, parse_tests
from trl_ext.workers.pool import WorkerDied

# sandbox runs per assert test. A pass stops where the test needs a result not known yet (an argument computed from
# it, or an unpacking, max(), next() or dict lookup of the placeholder), so a test takes one run per such step;
# every run must move the first call with no result further (a program cannot stretch the rounds past the test's
# own steps)
_MAX_ROUNDS = 32
_ROUNDS_TIME = 1.5  # the sandbox runs of one assert test share this many timeout_s (a round replays the earlier calls)
_CYCLE = (  # the calls of a deterministic test settle; `random` and the hash secret are the same in every run
    "the test's calls depend on results in a cycle: the program's results differ between sandbox runs of the "
    "same calls (os.urandom, the clock, id())"
)


@dataclasses.dataclass
class TestReport:
    """Result of grading one program: ``passed`` of ``total`` cases; ``infra_error`` when the sandbox itself
    failed (the program was not judged); ``statuses`` holds the status of every run made (and
    "unsupported_test" or "timeout" when an assert test could not be evaluated); ``detail`` says why an assert
    test failed."""

    __test__ = False  # not a pytest class

    passed: int
    total: int
    infra_error: bool = False
    statuses: list[str] = dataclasses.field(default_factory=list)
    detail: str = ""

    @property
    def all_passed(self) -> bool:
        return not self.infra_error and self.total > 0 and self.passed == self.total


def run_tests(
    program: str,
    tests: dict | str,
    *,
    limits: Limits | None = None,
    backend: str | Backend | None = None,
    stop_on_failure: bool = True,
    float_tol: float | None = None,
) -> TestReport:
    """Run ``program`` against ``tests`` in the sandbox; every comparison happens outside the program.

    ``program`` is the complete program (``trl_ext.rewards.code.assemble_program`` joins a spec's ``prefix``
    and a completion). stdio: one sandbox
    for all cases; the harness runs the program on each input in a fresh fork of itself, in its working directory
    emptied of what the cases before left (nothing of one case survives into the next) and returns the raw output, compared here with ``compare_stdio``. call: one
    process, the harness calls the function on each case and returns its results as plain data, compared with
    ``values_equal``. Both give every case ``limits.timeout_s`` and are graded as the cases finish, so
    ``stop_on_failure`` (binary rewards) ends the run at the first failing case. assert: record and replay
    (``trl_ext.sandbox.replay``): the test runs in a trusted evaluation worker against stand-ins of the
    program's functions, the sandbox runs only the calls they asked for (``limits.timeout_s`` per run, and
    ``1.5 * limits.timeout_s`` over all the runs of one test: the rounds) and returns the results as plain data;
    tests that need more than a few rounds, or pass arguments that are
    not plain data, fail with status "unsupported_test".

    ``backend``: a name ("auto", "bwrap", "landlock", "remote", "rlimit"; default ``TRL_EXT_SANDBOX_BACKEND``, else
    "auto") or a ``Backend`` (e.g. ``get_backend("remote", url)``); see ``trl_ext.sandbox.get_backend``.
    """
    spec = parse_tests(tests)
    limits = limits or Limits()
    runner = get_backend(backend)
    grade = {"stdio": _run_stdio, "call": _run_call}.get(spec["kind"])
    if grade is None:
        return admission.judged(lambda: _run_assert(runner, program, spec, limits), _settled)
    return admission.judged(lambda: grade(runner, program, spec, limits, stop_on_failure, float_tol), _settled)


def _settled(report: TestReport) -> bool:
    """A verdict no rerun alone could change: passed, or the sandbox failed (``admission.judged``)."""
    return report.all_passed or report.infra_error


class _StreamingGrader:
    """Grades the per-case records of a stdio or call run as they arrive (``Progress.stop``), so that a
    binary reward stops the run at the first failing case instead of running the rest. Only the records a
    ``RecordStream`` accepts count, one per real case in order; a forged or garbled record fails the program."""

    def __init__(self, stream: RecordStream, check: Callable[[dict], bool], stop_on_failure: bool) -> None:
        self.stream, self.check, self.stop_on_failure = stream, check, stop_on_failure
        self.results: list[bool] = []
        self.invalid_values = False  # a value that is no plain data: those cases failed

    def feed(self, stdout: bytes | str) -> bool:
        """Grade every complete new record; True when the run can stop (a case failed in binary mode)."""
        for record in self.stream.feed(stdout):
            self.invalid_values |= record.get("invalid", False)
            self.results.append(self.check(record))
        return bool(self.stream.invalid) or (self.stop_on_failure and not all(self.results))

    def report(self, result: RunResult, total: int, statuses: list[str]) -> TestReport:
        self.feed(result.stdout)
        report = TestReport(passed=sum(self.results), total=total, statuses=statuses)
        report.infra_error = result.status == "infra_error"
        if report.infra_error or self.stream.invalid:
            report.passed = 0
        if not report.infra_error and (self.stream.invalid or self.invalid_values):
            statuses.insert(0, "invalid_result")
            report.detail = self.stream.invalid or "a result is no plain data"
        return report


def _launch_streaming(runner, payload, limits, n_cases, grader, step_slack_s=0.0, max_output=None) -> RunResult:
    """One run for all cases: each case gets ``limits.timeout_s`` (plus slack for the harness's own work)."""
    run_limits = dataclasses.replace(
        limits,
        timeout_s=(limits.timeout_s + step_slack_s) * n_cases,
        max_output_bytes=max_output or limits.max_output_bytes,
    )
    progress = Progress(payload["marker"].encode(), limits.timeout_s + step_slack_s, grader.feed)
    return runner.launch({**payload, "kill_all": runner.kill_all_safe}, b"", run_limits, progress=progress)


def _in_parts(run_part, runner, spec, limits, stop_on_failure, slack_s) -> TestReport:
    """``run_part(cases)`` for all the spec's cases in one run or, where their time passes the longest run the
    backend accepts (a remote service's ``--max-timeout``), in runs of as many whole cases as fit one (red team
    round 14, R14J-3: a right program with many slow cases scored 0 on the remote backend only). A part that
    fails in binary mode, or whose sandbox failed, ends it; a forged record in any part fails the program."""
    cases, _ = spec["cases"], runner.prepare_runs()
    fit = len(cases) if (limits.timeout_s + slack_s) * len(cases) <= runner.longest_run_s else 0
    fit = fit or max(1, int(runner.longest_run_s // (limits.timeout_s + slack_s)))
    reports = []
    for start in range(0, len(cases), fit):
        reports.append(run_part(cases[start : start + fit]))
        if reports[-1].infra_error or (stop_on_failure and not reports[-1].all_passed):
            break
    if len(reports) == 1:
        return dataclasses.replace(reports[0], total=len(cases))
    joined = TestReport(sum(r.passed for r in reports), len(cases), any(r.infra_error for r in reports))
    joined.statuses = [status for r in reports for status in r.statuses]
    joined.detail = next((r.detail for r in reports if r.detail), "")
    if joined.infra_error or "invalid_result" in joined.statuses:
        joined.passed = 0
    return joined


def _run_stdio(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    part = functools.partial(_run_stdio_part, runner, program, limits=limits, stop_on_failure=stop_on_failure)
    return _in_parts(functools.partial(part, float_tol=float_tol), runner, spec, limits, stop_on_failure, 1.0)


def _run_stdio_part(runner, program, cases, limits, stop_on_failure, float_tol) -> TestReport:

    def check(record: dict) -> bool:
        return record["status"] == "ok" and compare_stdio(record["output"], cases[record["i"]]["output"], float_tol)

    marker = f"@@trl-ext-{secrets.token_hex(8)}@@"
    payload = {
        "mode": "stdio",
        "runtime": harness_runtime(),
        "code": program,
        "inputs": [case["input"] for case in cases],
        "marker": marker,
        "case_timeout": limits.timeout_s,
        "max_output": limits.max_output_bytes,
        "stop_on_failure": stop_on_failure,
    }
    grader = _StreamingGrader(RecordStream(marker, "stdio", len(cases)), check, stop_on_failure)
    max_output = len(cases) * (limits.max_output_bytes * 4 // 3 + 256) + 4096  # base64 records
    result = _launch_streaming(runner, payload, limits, len(cases), grader, step_slack_s=1.0, max_output=max_output)
    grader.feed(result.stdout)
    statuses = [record["status"] for record in grader.stream.records]
    if result.status in ("infra_error", "output_limit") or not statuses:
        statuses.append(result.status)
    return grader.report(result, len(cases), statuses)


def _calls_payload(program: str, calls: list[list], stop_on_failure: bool, seed: int | None = None) -> dict:
    marker = f"@@trl-ext-{secrets.token_hex(8)}@@"
    payload = {
        "mode": "calls",
        "runtime": harness_runtime(),
        "code": program,
        "calls": calls,
        "marker": marker,
        "stop_on_failure": stop_on_failure,
    }
    return payload if seed is None else {**payload, "seed": seed}  # the program's `random`, seeded before it loads


def _run_call(runner, program, spec, limits, stop_on_failure, float_tol) -> TestReport:
    part = functools.partial(_run_call_part, runner, program, spec["fn_name"], limits=limits)
    part = functools.partial(part, stop_on_failure=stop_on_failure, float_tol=float_tol)
    return _in_parts(part, runner, spec, limits, stop_on_failure, 0.0)


def _run_call_part(runner, program, fn_name, cases, limits, stop_on_failure, float_tol) -> TestReport:

    def check(record: dict) -> bool:
        return record["ok"] is True and values_equal(record["decoded"], cases[record["i"]]["expected"], float_tol)

    calls = [[fn_name, *replay.encode_call(case["args"], {})[:2], False] for case in cases]
    payload = _calls_payload(program, calls, stop_on_failure)
    grader = _StreamingGrader(RecordStream(payload["marker"], "calls", len(cases)), check, stop_on_failure)
    result = _launch_streaming(runner, payload, limits, len(cases), grader)
    return grader.report(result, len(cases), [result.status])


class EvaluatorUnavailable(Exception):
    """The evaluation worker could not be started, or died twice without answering: the one failure of an assert test that is infrastructure's
    (``TestReport.infra_error``). Nothing a program returns can raise it: decoding and comparing are total."""


def _start_evaluators():
    """The confined evaluation workers (``trl_ext.sandbox.eval_worker``: one fresh process per evaluation); their
    ``map`` raises ``RuntimeError`` itself (exactly that class) when a worker does not start."""
    return evaluation_pool(size=min(4, os.cpu_count() or 1))


class _EvaluationPool:
    """Trusted worker processes that evaluate assert tests (``replay.evaluate``), killed at a deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = None

    def evaluate(self, task: dict, deadline_s: float) -> dict | None:
        with self._lock:
            if self._pool is None:
                self._pool = _start_evaluators()
        try:
            return self._pool.map([task], deadline_s)[0]
        except RuntimeError as exc:
            # the pool's own "did not start" / "died twice without answering"; RecursionError & co are not
            if type(exc) in (RuntimeError, WorkerDied):
                raise EvaluatorUnavailable(str(exc)) from exc
            raise


EVALUATORS = _EvaluationPool()


class _FirstPasses:
    """The program-independent first evaluation of each test (no results yet), kept for the next programs
    graded against the same test (a GRPO group's); timed-out passes are not kept. One evaluation per test at a
    time: the programs of a group graded at once wait for the first one's answer instead of each making its own;
    where that evaluation timed out or raised, each then makes its own, as it would alone."""

    def __init__(self, size: int = 1024) -> None:
        self.size, self._lock, self._answers = size, threading.Lock(), {}
        self._flights: dict[str, list] = {}  # test -> [Event set once answered, answer, whether it was answered]

    def __call__(self, task: dict, deadline_s: float) -> dict | None:
        key = json.dumps(task, sort_keys=True)
        with self._lock:
            if key in self._answers:
                return self._answers[key]
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = [threading.Event(), None, False]
        if not leader:
            flight[0].wait()
            if flight[2] and flight[1] is not None:
                return flight[1]
            return EVALUATORS.evaluate(task, deadline_s)  # it timed out or raised: as if alone
        try:
            answer = EVALUATORS.evaluate(task, deadline_s)
            flight[1:] = [answer, True]
        finally:
            with self._lock:
                if flight[2] and flight[1] is not None:
                    if len(self._answers) >= self.size:
                        self._answers.pop(next(iter(self._answers)))
                    self._answers[key] = flight[1]
                self._flights.pop(key, None)
            flight[0].set()
        return answer

    def cache_clear(self) -> None:
        with self._lock:
            self._answers.clear()


_first_pass = _FirstPasses()


_TEST_SEED_KEY = secrets.token_bytes(32)  # this process's; never in a sandbox payload


def _test_seed(test: str) -> int:
    """The seed of the test's own ``random``: secret (a program cannot draw the test's "random" inputs ahead of
    it), the same for every evaluation of one test in this process (its programs share the first pass)."""
    digest = hmac.new(_TEST_SEED_KEY, test.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def _unsupported_plan(test: str, names: tuple[str, ...], prefix: str | None) -> str:
    """``unsupported_plan``, once per test text: its AST rules read the dataset's test alone (the names come from
    the test, its prefix and entry point), never a program, so every program graded against a test shares it. One
    thread at a time: the programs of a group graded at once wait for the first analysis instead of each making
    its own (the analysis holds the interpreter's lock throughout: the wait costs nothing)."""
    with _PLAN_LOCK:
        return _cached_plan(test, names, prefix)


_PLAN_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _cached_plan(test: str, names: tuple[str, ...], prefix: str | None) -> str:
    return unsupported_plan(test, list(names), prefix)


def read_entries(program: list, test: str, prefix: str | None, names: list) -> list:
    """The entries of the program's description (``records._described_names``) an evaluation reads: those of the
    test's names (``stand_ins``) and of the names the test or its prefix reads unbound (``shadowed_reads``). The
    rest (~140 kept builtins) change no verdict, so the worker is sent these only; all where the test does not
    parse (the evaluation reports that)."""
    read = entry_names(test, prefix, tuple(names))
    return program if read is None else [entry for entry in program if entry[0] in read]


def entry_names(test: str, prefix: str | None, names: tuple) -> frozenset | None:
    """The names whose description entries an evaluation reads: the test's names and the names the test or its
    prefix reads unbound; None where the test does not parse. Parsed one thread at a time
    (``assert_plan.parse_python``); cached, with the parse, per text (``_free_reads``)."""
    try:
        with _AST_LOCK:
            reads = _free_reads(test, prefix or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return reads | frozenset(names)


def forget_tests() -> None:
    """Drop what the judge keeps per test (first passes, AST refusals): a benchmark round's fresh start."""
    _first_pass.cache_clear()
    _cached_plan.cache_clear()


def _run_assert(runner, program, spec, limits) -> TestReport:
    names, modules = _assert_plan(spec["code"], spec.get("prefix"), spec.get("entry_point"))
    task = {"test": spec["code"], "prefix": spec.get("prefix"), "entry_point": spec.get("entry_point")}
    task.update(names=names, modules=modules, calls=[], results=[], seed=_test_seed(spec["code"]))
    deadline_s = limits.timeout_s + 5.0  # a trusted test on plain data; the margin covers a busy machine
    report = TestReport(passed=0, total=1)
    # nothing of the program judged, or not as the program is
    why = _unsupported_plan(spec["code"], tuple(names), spec.get("prefix"))
    why = why or program_refusal(program, spec["code"], names, spec.get("prefix"))  # the program's random state
    if why:
        report.statuses.append("unsupported_test")
        report.detail = why
        return report
    try:
        answer = _evaluate_in_rounds(runner, program, task, limits, deadline_s, report)
    except EvaluatorUnavailable:  # the evaluation worker could not start: not the program's fault
        report.infra_error = True
        return report
    if report.infra_error:
        return report
    if answer is not None:
        answer = refuse_shadowed(program, answer)
    if answer is None:
        report.statuses.append("timeout")
    elif answer["verdict"] == "passed":
        report.passed = 1
    elif answer["verdict"] in ("unsupported", "error"):
        report.statuses.append("unsupported_test")
    report.detail = "" if answer is None else answer.get("detail", "")
    return report


def _evaluate_in_rounds(runner, program, task, limits, deadline_s, report) -> dict | None:
    """Evaluate; run the calls the evaluation made, all of them in order, in one fresh sandbox; evaluate again
    with their results; ... The last answer (None: the evaluation hit its deadline); ``report`` collects the
    run statuses. A result is used only for the call at its own position (see ``replay._Session``)."""
    answer, frontier = _first_pass(task, deadline_s), -1
    seed = secrets.randbits(48)  # the same in every run of this evaluation: a replayed call draws the same numbers
    time_left = _ROUNDS_TIME * limits.timeout_s
    history = RunHistory()
    for _ in range(_MAX_ROUNDS):
        if answer is None or answer["verdict"] != "incomplete":
            return answer
        calls = answer["calls"]
        describing = "program" not in task and not calls  # a run only to say what the test's names are
        if not describing and (calls == task["calls"] or answer.get("frontier", 0) <= frontier):  # no progress
            return {"verdict": "unsupported", "detail": _CYCLE}
        frontier = frontier if describing else answer.get("frontier", 0)
        payload = {**_calls_payload(program, calls, False, seed), "describe": task["names"]}
        listed = entry_names(task["test"], task["prefix"], tuple(task["names"]))
        if listed is not None:  # the harness describes only the builtins read: ~4 KB less to write, carry and decode
            payload["builtins"] = sorted(listed)
        payload["watch"] = watched_modules(task["test"], task["prefix"])  # modules the test shares with the program
        payload["halts"] = answer.get("halts", [])
        stream = RecordStream(payload["marker"], "live", len(calls), described=True)
        if time_left <= 0:
            return None  # the rounds spent their time: a timeout, as one slow run
        started = time.monotonic()
        result = runner.launch(
            {**payload, "kill_all": runner.kill_all_safe},  # a private pid namespace or signal scope: only the run's
            b"",
            dataclasses.replace(limits, timeout_s=min(limits.timeout_s, time_left)),
        )
        time_left -= time.monotonic() - started
        report.statuses.append(result.status)
        if result.status == "infra_error":
            report.infra_error = True
            return None
        stream.feed(result.stdout)
        if stream.invalid:
            report.statuses.insert(0, "invalid_result")
            return {"verdict": "failed", "detail": stream.invalid}
        if stream.names is None:  # written once the program has loaded, before its first call
            return {"verdict": "failed", "detail": "the program did not load (it raised or ran out of time)"}
        if any(record.get("invalid") for record in stream.records):
            report.statuses.insert(0, "invalid_result")
        results = [{k: v for k, v in record.items() if k not in ("i", "decoded")} for record in stream.records]
        if not (results and results[-1].get("halt")):  # the harness ended the run: the rest were not run yet
            results += [{"ok": False, "missing": True}] * (len(calls) - len(results))
        if history.conflicts(calls, results):
            return {"verdict": "unsupported", "detail": RERUN_DETAIL}
        described = read_entries(stream.names or [], task["test"], task["prefix"], task["names"])
        task = {**task, "calls": calls, "results": results, "program": described}
        task["source"] = program_facts(program)  # what the judge trusts of its classes and names (cached per text)
        answer = EVALUATORS.evaluate(task, deadline_s)
    if answer is None or answer["verdict"] != "incomplete":
        return answer
    return {"verdict": "unsupported", "detail": f"the test needs more than {_MAX_ROUNDS} sandbox runs"}
