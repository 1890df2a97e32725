"""Convert rows of common code datasets into the ``tests`` spec that ``CodeTests`` reads.

Use with ``dataset.map(lambda row: {"tests": code_adapters.from_apps(row)})``. Each function returns a dict.
"""

from __future__ import annotations

import json
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


def from_humaneval(row: dict) -> dict:
    """HumanEval: ``test`` defines ``check(candidate)``, called on ``entry_point``."""
    return {"kind": "assert", "code": row["test"], "entry_point": row["entry_point"]}


def from_mbpp(row: dict) -> dict:
    """MBPP: ``test_imports`` + ``test_setup_code`` + the ``test_list`` asserts."""
    lines = list(row.get("test_imports") or []) + [row.get("test_setup_code") or ""] + list(row["test_list"])
    return {"kind": "assert", "code": "\n".join(line for line in lines if line)}
