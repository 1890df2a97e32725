"""Whether a program may draw from random's (or numpy's) module generator or seeds it (judge side: the program's
AST, once per program text). The test's ``random`` is its own secret-seeded
generator in the judge; a program drawing in the sandbox draws from another one, so a test that seeds or reads
that state judges only programs that never draw (``assert_plan.program_refusal``)."""

from __future__ import annotations

import ast

# standard modules that never draw from random's module generator: a program importing only these (and not
# reaching modules by name) cannot draw; any other import may (``email``, ``statistics``' samples, numpy...)
_NO_DRAWS = frozenset(
    {"math", "cmath", "collections", "itertools", "functools", "operator", "heapq", "bisect", "re", "string"}
    | {"typing", "dataclasses", "fractions", "decimal", "copy", "sys", "enum", "abc", "array", "struct", "json"}
    | {"datetime", "time", "os", "types", "numbers", "textwrap", "unicodedata", "calendar", "contextlib"}
    | {"hashlib", "base64", "binascii", "io", "pprint", "reprlib", "weakref", "graphlib", "zlib", "__future__"}
)
# names a program reaches a module (or its hidden generator) through without importing it
_REACHING = frozenset({"__import__", "import_module", "modules", "exec", "eval", "compile", "__builtins__"})
_SEEDS = frozenset({"seed", "setstate", "set_state"})


def program_state(nodes: tuple[ast.AST, ...]) -> tuple[bool, bool]:
    """(whether the program may draw from random's module generator, whether it may seed it), of the program's
    nodes (``assert_plan.program_nodes``). A name counts however it is written: a name, an attribute, a class
    pattern's keyword (``case object(seed=s)``) or a string (red team R10bJ-7)."""
    draws = seeds = False
    for node in nodes:
        modules = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        modules += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
        names += [node.attr] if isinstance(node, ast.Attribute) else [node.id] if isinstance(node, ast.Name) else []
        names += node.kwd_attrs if isinstance(node, ast.MatchClass) else []
        names += [node.value] if isinstance(node, ast.Constant) and type(node.value) is str else []
        draws = (
            draws or any(m.partition(".")[0] not in _NO_DRAWS for m in modules) or bool(_REACHING.intersection(names))
        )
        seeds = seeds or bool(_SEEDS.intersection(names))
    return draws or seeds, seeds
