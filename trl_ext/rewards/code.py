"""Code correctness: run the completion's program against its tests in the sandbox (``trl_ext.sandbox``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from trl_ext.rewards._text import (
    THINK_CLOSE,
    THINK_OPEN,
    answer_region,
    column,
    completion_text,
    last_code_block,
    log_outcomes,
)
from trl_ext.rewards.base import RewardFunction
from trl_ext.sandbox import Limits, parse_tests, run_tests
from trl_ext.sandbox.backends import Backend, backend_name, get_backend
from trl_ext.sandbox.backends import sandbox_url as resolve_sandbox_url
from trl_ext.sandbox.test_specs import target_names

_OUTCOMES = (
    "passed",
    "wrong",
    "no_code",
    "runtime_error",
    "timeout",
    "memory",
    "output_limit",
    "invalid_result",
    "unsupported_test",
    "infra_error",
)


def _defines(block: str, names: list[str]) -> bool:
    """Whether ``block`` defines one of ``names`` (or a LeetCode-style ``Solution`` class) at top level."""
    wanted = "|".join(re.escape(name) for name in [*names, "Solution"])
    return re.search(rf"^(?:async\s+def|def|class)\s+(?:{wanted})\b", block, re.MULTILINE) is not None


def assemble_program(answer: str, tests: dict) -> str | None:
    """The program of an answer region for a parsed test spec: its last fenced code block; with a ``prefix``
    (the code a function-completion continues: HumanEval's prompt), an unfenced answer is appended to the prefix
    as it is (a native completion), and a fenced block comes after the prefix (when it defines the tested
    function, its definition replaces the prefix's stub, and the prefix's imports and helpers stay available).
    None when there is no program."""
    block = last_code_block(answer)
    prefix = tests.get("prefix")
    if prefix is None or (block is not None and not block.strip()):
        return block
    if block is None:
        return prefix + answer if answer.strip() else None
    if _defines(block, target_names(tests)):
        return prefix.rstrip("\n") + "\n\n\n" + block
    return prefix + block


class CodeTests(RewardFunction):
    """Runs the last fenced code block of the answer region against the row's ``tests`` column.

    ``tests`` is a dict or its JSON string (see ``trl_ext.sandbox.parse_tests``; ``trl_ext.rewards.code_adapters``
    converts APPS/TACO, LiveCodeBench, HumanEval and MBPP rows). Every run happens in the sandbox and every
    comparison outside the program: in this process, or for assert tests in a trusted evaluation worker
    (``trl_ext.sandbox.replay``). ``backend`` (default ``TRL_EXT_SANDBOX_BACKEND``, else "auto": bubblewrap, else
    landlock) and ``sandbox_url`` (the remote backend's service, default ``TRL_EXT_SANDBOX_URL``) choose where
    (see ``trl_ext.sandbox.get_backend``).

    Scores: ``mode="binary"`` gives ``correct_value`` when all tests pass (stopping at the first failure),
    else ``wrong_value``; ``mode="fraction"`` gives the passed fraction. No code block → ``no_code_value``.
    Sandbox infrastructure faults → ``infra_value`` (None: TRL ignores the row); program faults (crash,
    timeout, memory, output flood) and assert tests the judge cannot evaluate outside the program
    (``unsupported_test``) → ``wrong_value``. Completions are graded concurrently by ``workers`` threads
    (default twice the cores, at most 16; ``trl_ext.rewards.code_tests_async`` is the async variant TRL runs
    alongside other rewards).
    Under a trainer, the share of each outcome (passed, wrong, no_code, timeout, ..., infra_error) is logged
    as ``<name>/<outcome>`` through TRL's ``log_metric``.

    With a ``prefix`` in the test spec (function-completion datasets: HumanEval's prompt), the completion may
    be a native continuation without a code fence (see ``assemble_program``). Identical (program, tests) pairs
    of one call, common in GRPO groups, are graded once.

    Per-run limits come from ``limits`` (default ``Limits()``: 5 s, 1024 MiB, 1 MiB of stdout, ...), with
    ``timeout_s`` / ``memory_mb`` overriding those two fields when given. Every stdio or call case gets
    ``timeout_s``; all cases of one program share one sandbox (see ``trl_ext.sandbox.run_tests``).
    """

    name = "code_tests"
    _transient = ("_executor", "_executor_lock")

    def __init__(
        self,
        mode: Literal["binary", "fraction"] = "binary",
        correct_value: float = 1.0,
        wrong_value: float = 0.0,
        no_code_value: float = 0.0,
        infra_value: float | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        limits: Limits | None = None,
        backend: str | Backend | None = None,
        sandbox_url: str | None = None,
        float_tol: float | None = None,
        workers: int | None = None,
        think_tags: tuple[str, str] | None = (THINK_OPEN, THINK_CLOSE),
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        if mode not in ("binary", "fraction"):
            raise ValueError(f'`mode` must be "binary" or "fraction", got {mode!r}.')
        backend_name(backend)  # ValueError naming `backend` or TRL_EXT_SANDBOX_BACKEND
        if not isinstance(backend, Backend) and backend_name(backend) == "remote":
            resolve_sandbox_url(sandbox_url)  # ValueError naming `sandbox_url` or TRL_EXT_SANDBOX_URL
        self.mode, self.backend, self.float_tol, self.think_tags = mode, backend, float_tol, think_tags
        self.sandbox_url = sandbox_url
        self.correct_value, self.wrong_value = correct_value, wrong_value
        self.no_code_value, self.infra_value = no_code_value, infra_value
        overrides = {k: v for k, v in (("timeout_s", timeout_s), ("memory_mb", memory_mb)) if v is not None}
        self.limits = dataclasses.replace(limits or Limits(), **overrides)
        # twice the cores: a sandbox run partly waits in the kernel (namespace set-up and tear-down), so runs
        # beyond the core count keep the cores busy (scripts/bench_code_grading.py measures both)
        self.workers = workers or min(16, 2 * (os.cpu_count() or 1))
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock: threading.Lock | None = None

    def program(self, text: str, tests: dict | None = None) -> str | None:
        """The program to run for a parsed test spec: the last fenced code block of the answer region, or the
        spec's ``prefix`` followed by the answer (``assemble_program``); None if there is none."""
        region = answer_region(text, *(self.think_tags or (None, None)))
        return assemble_program(region, tests or {}) if region is not None else None

    def grade(self, completion: Any, tests: dict, index: int = 0) -> tuple[float | None, str]:
        """(score, outcome) for one completion against one parsed test spec. ``outcome`` is "passed",
        "no_code", "infra_error", "wrong" (ran but the output differed), "unsupported_test" (an assert test the
        judge cannot evaluate outside the program) or the status of the failing run ("runtime_error",
        "timeout", "memory", "output_limit"), or "invalid_result" (a result that is no plain data, or a forged or
        garbled result record)."""
        program = self.program(completion_text(completion, index), tests)
        if program is None or not program.strip():
            return self.no_code_value, "no_code"
        return self.grade_program(program, tests)

    def grade_program(self, program: str, tests: dict) -> tuple[float | None, str]:
        """(score, outcome) of one program against one parsed test spec."""
        report = run_tests(
            program,
            tests,
            limits=self.limits,
            backend=get_backend(self.backend, self.sandbox_url),
            stop_on_failure=self.mode == "binary",
            float_tol=self.float_tol,
        )
        if report.infra_error:
            return self.infra_value, "infra_error"
        outcome = "passed" if report.all_passed else next((s for s in report.statuses if s != "ok"), "wrong")
        if self.mode == "fraction":
            return (report.passed / report.total if report.total else self.wrong_value), outcome
        return (self.correct_value if report.all_passed else self.wrong_value), outcome

    def score(self, completion: Any, tests: dict, index: int = 0) -> float | None:
        """Score one completion against one parsed test spec."""
        return self.grade(completion, tests, index)[0]

    def _finish(self, graded: list[tuple[float | None, str]], kwargs: dict) -> list[float | None]:
        log_outcomes(self.__name__, [outcome for _, outcome in graded], _OUTCOMES, kwargs.get("log_metric"))
        return [score for score, _ in graded]

    def _prepare(self, completions: list, kwargs: dict) -> list[dict]:
        rows = column(kwargs, ("tests",), len(completions), self.__name__)
        specs = [parse_tests(t, where=f"{self.__name__}, row {i}") for i, t in enumerate(rows)]
        get_backend(self.backend, self.sandbox_url)  # fail loudly (SandboxUnavailable) before grading anything
        return specs

    def executor(self) -> ThreadPoolExecutor:
        if self._executor_lock is None:
            self._executor_lock = threading.Lock()
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=f"trl-ext-{self.__name__}")
            return self._executor

    def _jobs(self, completions: list, specs: list[dict]) -> tuple[list[tuple[str, dict]], list[int | None]]:
        """The distinct (program, tests) pairs of one call, and each completion's pair (None: no program)."""
        index: dict[tuple[str, str], int] = {}
        jobs: list[tuple[str, dict]] = []
        slots: list[int | None] = []
        for i, (completion, spec) in enumerate(zip(completions, specs)):
            program = self.program(completion_text(completion, i), spec)
            if program is None or not program.strip():
                slots.append(None)
                continue
            key = (program, json.dumps(spec, sort_keys=True))
            if key not in index:
                index[key] = len(jobs)
                jobs.append((program, spec))
            slots.append(index[key])
        return jobs, slots

    def _spread(self, slots: list[int | None], graded: list, kwargs: dict) -> list[float | None]:
        no_code = (self.no_code_value, "no_code")
        return self._finish([no_code if slot is None else graded[slot] for slot in slots], kwargs)

    def __call__(self, completions: list, **kwargs: Any) -> list[float | None]:
        specs = self._prepare(completions, kwargs)
        jobs, slots = self._jobs(completions, specs)
        futures = [self.executor().submit(self.grade_program, program, spec) for program, spec in jobs]
        return self._spread(slots, [f.result() for f in futures], kwargs)


class AsyncCodeTests(CodeTests):
    """``CodeTests`` as an async reward: TRL awaits it concurrently with its other async rewards. At most
    ``workers`` sandboxes run at once (per instance)."""

    name = "code_tests"

    async def __call__(self, completions: list, **kwargs: Any) -> list[float | None]:
        loop = asyncio.get_running_loop()
        specs = await loop.run_in_executor(None, self._prepare, completions, kwargs)
        jobs, slots = self._jobs(completions, specs)
        executor = self.executor()
        graded = await asyncio.gather(*(loop.run_in_executor(executor, self.grade_program, *job) for job in jobs))
        return self._spread(slots, list(graded), kwargs)


code_tests = CodeTests()
code_tests_async = AsyncCodeTests()
