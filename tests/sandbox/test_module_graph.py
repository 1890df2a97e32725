"""The sandbox and rewards packages form no import circle (imports inside functions count), and no file of
``trl_ext/sandbox`` is over 450 lines."""

import ast
from pathlib import Path

import trl_ext

PACKAGE = Path(trl_ext.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):  # every import, at any depth
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import sub` imports the submodule when there is one, else the package
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                    for a in node.names
                ]
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    for start in graph:
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        if state.get(start):
            continue
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_no_import_circle_in_rewards_sandbox_and_workers():
    graph = _graph()
    scope = {
        n: {t for t in e if t.startswith(("trl_ext.sandbox", "trl_ext.rewards", "trl_ext.workers"))}
        for n, e in graph.items()
        if n.startswith(("trl_ext.sandbox", "trl_ext.rewards", "trl_ext.workers"))
    }
    assert _cycle(scope) is None, _cycle(scope)


def test_no_circle_between_the_packages():
    """rewards -> sandbox -> workers, never back (a package's modules collapsed into one node)."""
    packages = ("trl_ext.sandbox", "trl_ext.rewards", "trl_ext.workers")

    def package(module):
        return next((p for p in packages if module == p or module.startswith(p + ".")), None)

    collapsed: dict[str, set[str]] = {p: set() for p in packages}
    for name, targets in _graph().items():
        if package(name):
            collapsed[package(name)] |= {package(t) for t in targets if package(t) not in (None, package(name))}
    assert _cycle(collapsed) is None, _cycle(collapsed)


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_sandbox_file_over_450_lines():
    long = {p.name: n for p in (PACKAGE / "sandbox").glob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}
