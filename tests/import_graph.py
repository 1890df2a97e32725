"""The import graph of trl_ext, read from the source with ``ast``: every ``import`` and ``from ... import``, at
module level or inside a function, and every ``importlib.import_module("...")`` / ``__import__("...")`` call on a
string literal. Used by tests/test_layout.py to hold the layout rules (no import circle)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "trl_ext"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported_names(tree: ast.AST, name: str, is_package: bool) -> Iterator[str]:
    """Dotted names a module imports (for ``from X import Y``: X.Y; the caller trims it to the module it names)."""
    base = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                source = ".".join(anchor + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # each name resolves to the most specific existing module: trl_ext.x.y when y is a module, else trl_ext.x
            for alias in node.names:
                yield f"{source}.{alias.name}"
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and _literal_argument(node):
            yield node.args[0].value


def _literal_argument(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def module_graph() -> dict[str, set[str]]:
    """module -> the trl_ext modules it imports (the most specific existing module of each imported name); a copy
    of the graph read once per test process (the layout tests read it several times)."""
    return {name: set(targets) for name, targets in _read_module_graph().items()}


@functools.cache
def _read_module_graph() -> dict[str, frozenset[str]]:
    known = modules()
    graph: dict[str, frozenset[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set()
        for imported in _imported_names(tree, name, _is_package(path)):
            if not imported.startswith(PACKAGE):
                continue
            # ``from trl_ext.x import y``: y is a module when trl_ext.x.y exists, else a name in trl_ext.x
            while imported and imported not in known:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = frozenset(targets)
    return graph


def part_of(module: str) -> str:
    """The first-level part a module belongs to: ``trl_ext.trainers.grpo`` -> ``trainers``; the package's own
    ``__init__`` is the part ``trl_ext``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def part_graph(graph: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """first-level part -> the parts it imports (imports inside a part left out)."""
    graph = module_graph() if graph is None else graph
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = part_of(module)
        parts.setdefault(source, set()).update(part_of(t) for t in targets if part_of(t) != source)
    return parts


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
