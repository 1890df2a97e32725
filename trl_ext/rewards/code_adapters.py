"""Convert rows of common code datasets into the ``tests`` spec that ``CodeTests`` reads.

Use with ``dataset.map(lambda row: {"tests": code_adapters.from_apps(row)})``. Each function returns a dict.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any


def _json(value: Any, field: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(
                f"`{field}` is not valid JSON ({exc}); compressed test files must be decoded first."
            ) from None
    return value


def _text(value: Any) -> str:
    return "\n".join(value) if isinstance(value, list) else str(value)


def from_apps(row: dict) -> dict:
    """APPS / TACO: ``input_output`` = {"inputs", "outputs", "fn_name"?}. With ``fn_name`` the cases are calls
    (APPS wraps each expected return value in a one-element list, which is unwrapped), else stdin/stdout."""
    spec = _json(row["input_output"], "input_output")
    inputs, outputs = spec["inputs"], spec["outputs"]
    if len(inputs) != len(outputs):
        raise ValueError(f"`input_output` has {len(inputs)} inputs but {len(outputs)} outputs.")
    if spec.get("fn_name"):
        cases = [
            {"args": list(args), "expected": out[0] if isinstance(out, list) and len(out) == 1 else out}
            for args, out in zip(inputs, outputs)
        ]
        return {"kind": "call", "fn_name": spec["fn_name"], "cases": cases}
    return {"kind": "stdio", "cases": [{"input": _text(i), "output": _text(o)} for i, o in zip(inputs, outputs)]}


def from_livecodebench(row: dict, fields: tuple[str, ...] = ("public_test_cases", "private_test_cases")) -> dict:
    """LiveCodeBench: JSON lists of {"input", "output", "testtype": "stdin" | "functional"}; functional cases
    take one JSON argument per input line and ``metadata["func_name"]``."""
    cases = [case for field in fields if row.get(field) for case in _json(row[field], field)]
    if not cases:
        raise ValueError(f"the row has no test cases in {fields}.")
    if all(case.get("testtype") == "functional" for case in cases):
        fn_name = _json(row.get("metadata") or "{}", "metadata").get("func_name")
        if not fn_name:
            raise ValueError("functional LiveCodeBench tests need `metadata['func_name']`.")
        calls = [
            {
                "args": [json.loads(line) for line in c["input"].split("\n") if line.strip()],
                "expected": json.loads(c["output"]),
            }
            for c in cases
        ]
        return {"kind": "call", "fn_name": fn_name, "cases": calls}
    return {"kind": "stdio", "cases": [{"input": c["input"], "output": c["output"]} for c in cases]}


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a literal made of JSON types (tuples allowed), else (False, None)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return (True, value) if _jsonable(value) else (False, None)


def _equality_case(stmt: ast.stmt, fn_names: set[str]) -> tuple[str, dict] | None:
    """``assert f(<literals>) == <literal>`` (either side) as (f, {"args", "expected"}), else None."""
    if not isinstance(stmt, ast.Assert) or not isinstance(stmt.test, ast.Compare):
        return None
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return None
    for call, other in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in fn_names:
            if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
                return None
            parsed = [_literal(a) for a in call.args]
            ok, expected = _literal(other)
            if ok and all(p_ok for p_ok, _ in parsed):
                args = json.loads(json.dumps([v for _, v in parsed]))
                return call.func.id, {"args": args, "expected": json.loads(json.dumps(expected))}
    return None


def asserts_to_call(code: str, fn_name: str | None = None) -> dict | None:
    """A call-kind spec equivalent to ``code`` when every statement is ``assert f(<literals>) == <literal>``
    on one function (HumanEval's ``def check(candidate)`` body counts, with ``candidate`` read as ``fn_name``),
    else None. Both kinds are judged outside the sandbox; the call form skips the judge's evaluation worker but
    loses some Python semantics: tuples become lists and ``True`` no longer equals ``1``."""
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    names = {fn_name} if fn_name else None
    stmts = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "check" and fn_name and len(stmt.args.args) == 1:
            names = {stmt.args.args[0].arg}
            stmts += [s for s in stmt.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        elif isinstance(stmt, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id == "METADATA" for t in stmt.targets
        ):
            continue
        else:
            stmts.append(stmt)
    if not stmts:
        return None
    if names is None:
        first = _equality_case(stmts[0], {n.id for n in ast.walk(stmts[0]) if isinstance(n, ast.Name)})
        names = {first[0]} if first else set()
    cases = [_equality_case(stmt, names) for stmt in stmts]
    if not all(cases):
        return None
    target = fn_name if fn_name and names != {fn_name} else cases[0][0]
    return {"kind": "call", "fn_name": target, "cases": [case for _, case in cases]}


def from_humaneval(row: dict, prefer_call: bool = False) -> dict:
    """HumanEval: ``test`` defines ``check(candidate)``, called on ``entry_point``; the ``prompt`` (the code the
    completion continues) becomes the spec's ``prefix``, so native (unfenced) completions are graded. With
    ``prefer_call``, a test made only of ``assert candidate(<literals>) == <literal>`` becomes a call spec."""
    spec = asserts_to_call(row["test"], row["entry_point"]) if prefer_call else None
    spec = spec or {"kind": "assert", "code": row["test"], "entry_point": row["entry_point"]}
    return {**spec, "prefix": row["prompt"]} if row.get("prompt") else spec


def from_mbpp(row: dict, prefer_call: bool = False) -> dict:
    """MBPP: ``test_imports`` + ``test_setup_code`` + the ``test_list`` asserts (the prompt is prose, so there is
    no prefix). With ``prefer_call`` and no setup, asserts of the form ``assert f(<literals>) == <literal>``
    become a call spec."""
    setup = list(row.get("test_imports") or []) + [row.get("test_setup_code") or ""]
    if prefer_call and not any(line.strip() for line in setup):
        spec = asserts_to_call("\n".join(row["test_list"]))
        if spec:
            return spec
    lines = setup + list(row["test_list"])
    return {"kind": "assert", "code": "\n".join(line for line in lines if line)}
