"""Which names of an assert test are the program's (judge side: the AST of the test and of its prefix)."""

from __future__ import annotations

import ast
import builtins
import sys

from trl_ext.sandbox.replay import ASSERT_HOOK


def _bound_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def program_names(test: str, prefix: str | None, entry_point: str | None) -> tuple[list[str], list[str]]:
    """(the program's functions the test uses, standard modules it uses without importing them): names the test
    reads but neither defines nor imports, that are no builtins and not defined by ``prefix``; plus
    ``entry_point`` (without one, the last function ``prefix`` defines: the one the completion continues).
    The prefix's other definitions are the test's helpers, taken from the prefix, never from the program.
    Raises SyntaxError when ``test`` or ``prefix`` does not parse."""
    tree = ast.parse(test)
    defined = _bound_names(tree) | set(dir(builtins))
    if prefix:
        prefix_tree = ast.parse(prefix)
        stubs = [s.name for s in prefix_tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        entry_point = entry_point or (stubs[-1] if stubs else None)
        defined |= _bound_names(prefix_tree) - {entry_point}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    free = read - defined - {ASSERT_HOOK}
    modules = sorted(n for n in free if n in sys.stdlib_module_names)
    names = sorted((free - set(modules)) | ({entry_point} if entry_point else set()))
    return names, modules
