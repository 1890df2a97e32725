"""Interpreter state an assert test may change (or read) that the program's process does not share (judge side:
the test's AST). The test runs in the judge, the program in the sandbox: a test's ``random.seed(0)``,
``sys.setrecursionlimit(60)`` or ``collections.Counter.most_common = boom`` never reaches the program, so CPython
and the judge would disagree (red team R8b-2); such a test is refused (``unsupported_test``) rather than judged."""

from __future__ import annotations

import ast

# the functions that set or read state of the interpreter or of a module's hidden instance (random's generator,
# numpy's legacy one, recursion limit, switch interval, int digits, tracing): by name, wherever it appears
STATE_FUNCTIONS = frozenset(
    {"seed", "setstate", "getstate", "set_state", "get_state", "setrecursionlimit", "getrecursionlimit"}
    | {"setswitchinterval", "getswitchinterval", "set_int_max_str_digits", "get_int_max_str_digits"}
    | {"settrace", "setprofile", "__setattr__", "__delattr__", "setattr", "delattr"}
)


def state_change(tree: ast.Module) -> str:
    """Why the test touches state the program does not share ('' when it does not): it names one of
    ``STATE_FUNCTIONS`` (an attribute, an imported or called name, or a string: ``getattr(random, 'seed')``), or it
    assigns or deletes an attribute of something an imported module, ``__import__`` or a parameter of one of its
    functions leads to (``collections.Counter.most_common = f``, ``C = collections.Counter; C.x = f``): a library
    class's attribute. Not seen: code the test builds at run time (``exec``, ``eval``) and objects reached through
    the program's own functions' results or globals (``f.__globals__``, which ``introspection`` refuses)."""
    nodes = list(ast.walk(tree))  # walked once: every rule below reads this list (a test is analysed once per text,
    # ``judge._unsupported_plan``, but a dataset of distinct tests pays this for every test)
    for node in nodes:
        found = STATE_FUNCTIONS.intersection(_named(node))
        if found:
            return f"the test uses {min(found)}, state of the interpreter the sandboxed program does not share"
    tainted, modules = _library_names(nodes), _modules(nodes)
    for node in nodes:
        written = isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
        if written and isinstance(node.value, ast.Name) and node.value.id in modules:
            continue  # a module's own attribute (``sys.stdout = ...``): the module watch's (carried or refused)
        if written and any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node.value)):
            return "the test sets an attribute of a library object, which the sandboxed program does not share"
    return ""


def _named(node: ast.AST) -> tuple:
    """The names ``node`` says: an attribute's, a name's, those a ``from`` import imports, a string constant."""
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.ImportFrom):
        return tuple(alias.name for alias in node.names)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    return ()


def _library_names(nodes: list[ast.AST]) -> set[str]:
    """The names that may hold a module or what it leads to: imported, ``__import__``, function parameters, and
    names bound from an expression reading one of those (a few steps deep). ``nodes``: the test's, walked."""
    names = {"__import__", "importlib", "sys"}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    classes = [node for node in nodes if isinstance(node, ast.ClassDef)]
    for node in classes:  # a method's first parameter is the test's own instance (``self.x = v``)
        methods = [f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for method in methods:
            first = (method.args.posonlyargs + method.args.args)[:1]
            names.difference_update(a.arg for a in first if a.arg in ("self", "cls"))
    bindings = [node for node in nodes if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))]
    bindings += [node for node in nodes if isinstance(node, (ast.For, ast.comprehension, ast.withitem))]
    reads = [_names_read(node) for node in bindings]  # each source walked once, not once per step
    for _ in range(4):
        for node, read in zip(bindings, reads):
            if not names.isdisjoint(read):
                targets = getattr(node, "targets", None) or [
                    getattr(node, "target", None),
                    getattr(node, "optional_vars", None),
                ]
                names.update(name for target in targets if target is not None for name in _bound(target))
    return names


def _bound(target: ast.AST) -> set[str]:
    """The names a binding target binds (``a``, ``a, *b``); an attribute or item target binds none."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else []
    return set().union(*map(_bound, elts))


def _names_read(binding: ast.AST) -> frozenset[str]:
    """The names the source of ``binding`` (an assignment's value, a loop's iterable, a ``with``'s context) reads."""
    source = (
        getattr(binding, "value", None) or getattr(binding, "iter", None) or getattr(binding, "context_expr", None)
    )
    if source is None:
        return frozenset()
    return frozenset(n.id for n in ast.walk(source) if isinstance(n, ast.Name))


def _modules(nodes: list[ast.AST]) -> set[str]:
    """The names only ``import x`` (``import x as y``) binds in the test: modules, whatever else runs."""
    imported = {(a.asname or a.name).split(".")[0] for n in nodes if isinstance(n, ast.Import) for a in n.names}
    other = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    other |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    other |= {getattr(n, "name", None) for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    other |= {n.name for n in nodes if isinstance(n, ast.ExceptHandler)}
    other |= {a.asname or a.name for n in nodes if isinstance(n, ast.ImportFrom) for a in n.names}
    return imported - other
