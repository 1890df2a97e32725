"""Whether an assert test writes an attribute of something a library class may be reached from (judge side: the
test's AST; red team R8b-2, R9-3). Each name the test binds gets a tier, a few steps deep: "tainted" (it may hold a
module, a library class or function: imported names, what reads them, a function or class of the test whose
result or base reads them, a parameter some call may give one) or "instance" (an object a library class or the
program made: ``SimpleNamespace()``, ``Counter()``, a program function's result). Writing an attribute of a
tainted name refuses; of an instance only through an expression (``type(c).x = f``, ``c.__class__.x = f``), since
its own attributes are its own. Names are not scoped: a name tainted anywhere is tainted everywhere."""

from __future__ import annotations

import ast
import builtins
import sys
from collections import Counter

_ALWAYS = frozenset({"__import__", "importlib", "sys", "builtins", "__builtins__"})
_BUILTINS = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def library_write(nodes: list[ast.AST], bound: dict[str, list]) -> bool:
    """Whether the test (``nodes``: its walked AST; ``bound``: name -> its bindings, ``test_state._bindings``)
    assigns or deletes an attribute of a library object."""
    tainted, instances = _tiers(nodes, bound)
    modules = {name for name, values in bound.items() if all(v == "import" for v in values)}
    for node in nodes:
        if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))):
            continue
        base = node.value
        if isinstance(base, ast.Name):
            if base.id in tainted and base.id not in modules:  # ``sys.stdout = x``: the module watch's
                return True
        elif any(name in tainted or name in instances or free_name(name, bound) for name in _reads(base)):
            return True
    return False


def bound_names(target: ast.AST) -> set[str]:
    """The names a binding target binds (``a``, ``a, *b``); an attribute or item target binds none."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else []
    return set().union(*map(bound_names, elts))


def free_name(name: str, bound: dict) -> bool:
    """A name the test never binds, no builtin and no standard module (the judge gives the test those it uses
    without importing them): the program's function, whose results cross as data."""
    return name not in bound and name not in _BUILTINS and name not in sys.stdlib_module_names


def _reads(node: ast.AST | None) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)) if node is not None else frozenset()


def _sources(nodes: list[ast.AST]) -> list[tuple[set[str], ast.AST, frozenset[str]]]:
    """(the names bound, the expression bound to them, the names it reads) for each binding with a source."""
    found = []
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = getattr(node, "targets", None) or [node.target]
            source = node.value
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets, source = [node.target], node.iter
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets, source = [node.optional_vars], node.context_expr
        else:
            continue
        names = set().union(*map(bound_names, targets))
        found.append((names, source, _reads(source)))
    return found


def _made(source: ast.AST, bound: dict, leaky: set[str]) -> bool:
    """Whether ``source`` makes a fresh object: a capitalized library class called (``types.SimpleNamespace()``,
    ``from argparse import Namespace``), a program function, or a class of the test reading library names."""
    if not isinstance(source, ast.Call):
        return False
    func = source.func
    if isinstance(func, ast.Attribute):
        return func.attr[:1].isupper()
    if not isinstance(func, ast.Name):
        return False
    library_class = func.id[:1].isupper() and all(v == "from" for v in bound.get(func.id, ["other"]))
    return library_class or free_name(func.id, bound) or func.id in leaky


def _alias(source: ast.AST) -> bool:
    """``x`` or ``x.a.b`` without a dunder: the object itself or its own attributes."""
    while isinstance(source, ast.Attribute) and not source.attr.startswith("__"):
        source = source.value
    return isinstance(source, ast.Name)


def _tiers(nodes: list[ast.AST], bound: dict) -> tuple[set[str], set[str]]:
    tainted = set(_ALWAYS) | {name for name, values in bound.items() if {"import", "from"} & set(map(str, values))}
    tainted |= {
        n.id for n in nodes if isinstance(n, ast.Name) and n.id not in bound and n.id in sys.stdlib_module_names
    }
    instances: set[str] = set()
    sources = _sources(nodes)
    classes = [node for node in nodes if isinstance(node, ast.ClassDef)]
    methods = {id(f) for c in classes for f in c.body if isinstance(f, _FUNCTIONS)}
    functions = [node for node in nodes if isinstance(node, _FUNCTIONS)]
    names = {f.name for f in functions}
    direct_calls = [
        n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
    ]
    passed: dict[str, set[str]] = {}  # a test function -> the names its direct calls' arguments read
    for call in direct_calls:
        passed.setdefault(call.func.id, set()).update(*map(_reads, [*call.args, *(k.value for k in call.keywords)]))
    loaded = Counter(n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    direct = Counter(call.func.id for call in direct_calls)
    escaping = {name for name in names if loaded[name] > direct[name]}  # read as a value: called anywhere
    bodies = {id(f): _reads(ast.Module(body=f.body, type_ignores=[])) for f in functions}
    bases = {c.name: frozenset().union(*map(_reads, [*c.bases, *(k.value for k in c.keywords)])) for c in classes}
    givens = {id(f): _given(f, passed, f.name in escaping or id(f) in methods, frozenset(loaded)) for f in functions}
    leaky: set[str] = set()
    for _ in range(4):
        for c in classes:  # a class deriving from a library class is one; a class reading library names may
            if bases[c.name] & tainted:  # give them through its methods (its instances are "instances")
                tainted.add(c.name)
            if any(bodies[id(f)] & tainted for f in c.body if isinstance(f, _FUNCTIONS)):
                leaky.add(c.name)
        for names, source, read in sources:
            if read & tainted:
                (instances if _made(source, bound, leaky) else tainted).update(names)
            elif _made(source, bound, leaky) or (read & instances and _alias(source)):
                instances.update(names)
            elif read & instances or any(free_name(name, bound) for name in read):
                tainted.update(names)
        for f in functions:
            if bodies[id(f)] & tainted:
                tainted.add(f.name)  # what it returns may be a library object (``def get(): return Counter``)
            given = givens[id(f)]
            params = _params(f, skip_first=id(f) in methods)
            if given & tainted:
                tainted.update(params)
            elif given & instances or any(free_name(name, bound) for name in given):
                instances.update(params)
        for c in classes:  # ``self``/``cls`` of a library class's subclass or of a leaky class: an instance
            if c.name in tainted or c.name in leaky:
                instances.update(_params(f, skip_first=False)[:1][0] for f in c.body if _first(f))
    return tainted, instances


def _given(f, passed: dict, escaping: bool, everything: frozenset[str]) -> frozenset[str]:
    """The names the arguments ``f`` may be given read: its defaults' and its direct calls' (every name the test
    reads where ``f`` escapes: a method, a function passed as a value)."""
    given = frozenset().union(*map(_reads, [*f.args.defaults, *(d for d in f.args.kw_defaults if d is not None)]))
    if escaping or f.name not in passed:
        return given | everything
    return given | passed[f.name]


def _params(f, skip_first: bool) -> list[str]:
    args = f.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    positional = args.posonlyargs + args.args
    return names[1:] if skip_first and positional else names


def _first(f: ast.AST) -> bool:
    return isinstance(f, _FUNCTIONS) and bool(f.args.posonlyargs + f.args.args)
