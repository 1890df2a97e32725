"""Test specs: what ``run_tests`` accepts (stdio, call, assert), validated with errors naming the row and field."""

from __future__ import annotations

import ast
import functools
import json
from typing import Any

from trl_ext.sandbox import replay
from trl_ext.sandbox.assert_plan import parse_python, program_names

TEST_KINDS = ("stdio", "call", "assert")


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
    Any kind may carry ``"prefix"``: the code a function-completion continues (it must parse; see
    ``trl_ext.rewards.code.assemble_program``).
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
    if tests.get("prefix") is not None:
        _need(tests, "prefix", str, where)
        _check_parses(tests["prefix"], "prefix", where)
    if kind == "assert":
        _parse_assert(tests, where)
        return tests
    cases = _need(tests, "cases", list, where)
    if not cases:
        raise ValueError(f"{where}: `tests['cases']` is empty; give at least one case.")
    if kind == "call" and not _need(tests, "fn_name", str, where).isidentifier():
        raise ValueError(f"{where}: `fn_name` must be a Python identifier, got {tests['fn_name']!r}.")
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
            try:
                replay.encode(list(case["args"]))
            except TypeError as exc:
                raise ValueError(f"{case_where}: `args` must be plain data ({exc}).") from None
    return tests


def _check_parses(code: str, field: str, where: str) -> None:
    error = _syntax_error(code)
    if error:
        raise ValueError(f"{where}: `{field}` is not valid Python ({error}).")


@functools.lru_cache(maxsize=4096)
def _syntax_error(code: str) -> str:
    """'' when ``code`` parses, else where and why not (cached: a dataset repeats each test G times)."""
    try:
        parse_python(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return ""


@functools.lru_cache(maxsize=4096)
def _defines_check(code: str) -> bool:
    return any(isinstance(s, ast.FunctionDef) and s.name == "check" for s in parse_python(code).body)


def _parse_assert(tests: dict, where: str) -> None:
    code = _need(tests, "code", str, where)
    _check_parses(code, "code", where)
    entry_point = tests.get("entry_point")
    if entry_point is not None:
        if not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise ValueError(f"{where}: `entry_point` must be a Python identifier, got {entry_point!r}.")
        if not _defines_check(code):
            raise ValueError(f"{where}: with `entry_point`, `code` must define check(candidate) (HumanEval style).")
    _assert_plan(code, tests.get("prefix"), entry_point)


@functools.lru_cache(maxsize=4096)
def _assert_plan(code: str, prefix: str | None, entry_point: str | None) -> tuple[list[str], list[str]]:
    return program_names(code, prefix, entry_point)


def target_names(spec: dict) -> list[str]:
    """The functions a program must define for ``spec`` (a parsed test spec); none for stdio."""
    if spec["kind"] == "call":
        return [spec["fn_name"]]
    if spec["kind"] == "assert":
        return _assert_plan(spec["code"], spec.get("prefix"), spec.get("entry_point"))[0]
    return []
