"""Interpreter state an assert test may change (or read) that the program's process does not share (judge side:
the test's AST, with its prefix's helpers). The test runs in the judge, the program in the sandbox: a test's
``random.seed(0)``, ``sys.setrecursionlimit(60)``, ``os.environ[k] = v`` or ``collections.Counter.most_common =
boom`` never reaches the program, so CPython and the judge would disagree (red team R8b-2, R9-4); such a test is
refused (``unsupported_test``) rather than judged. Seeding or reading random's hidden generator matters only where
the program may draw from it (``random_state``, checked against the program's source by ``assert_plan``)."""

from __future__ import annotations

import ast
import functools
import sys

from trl_ext.sandbox.test_taint import bound_names, free_name, library_write

# the functions that set or read state of the interpreter, of a module's hidden instance (random's generator,
# numpy's legacy one) or of the process (decimal's context, the environment), read as an attribute, imported by
# name or named by a string an attribute lookup takes (``getattr(random, 'seed')``, ``vars(random)['seed']``)
RANDOM_FUNCTIONS = frozenset({"seed", "setstate", "getstate", "set_state", "get_state", "_inst"})  # _inst: the
# module's hidden generator itself (``random._inst.__init__(0)`` re-seeds it, red team R9-11)
STATE_FUNCTIONS = RANDOM_FUNCTIONS | frozenset(
    {"setrecursionlimit", "getrecursionlimit", "setswitchinterval", "getswitchinterval", "set_int_max_str_digits"}
    | {"get_int_max_str_digits", "settrace", "setprofile", "__setattr__", "__delattr__", "setattr", "delattr"}
    | {"setcontext", "localcontext", "putenv", "unsetenv"}
    | {"get_referents", "get_referrers", "get_objects"}  # gc: any object, a library class's dict too (R9-11)
)
_SETTERS = frozenset({"setattr", "delattr", "__setattr__", "__delattr__"})  # builtins: refused wherever read
# classes whose call makes a fresh generator (``rng = random.Random(1); rng.seed(2)`` seeds the test's own one)
_FRESH = frozenset({"Random", "SystemRandom", "RandomState", "default_rng", "Generator"})
_STAR_MODULES = frozenset({"random", "sys", "numpy", "decimal", "os"})
# the process's lists and mappings a test may change in place (``os.environ[k] = v``, ``sys.argv.append(x)``)
_PROCESS = frozenset({"environ", "argv"})
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "append"})
_MUTATORS |= frozenset({"extend", "insert", "remove", "sort", "reverse"})


def state_change(tree: ast.Module) -> str:
    """Why the test touches state the program does not share ('' when it does not), random's generator aside
    (``random_state``): a state function (``STATE_FUNCTIONS``) read where it may be a module's, ``os.environ``
    or ``sys.argv`` changed, or an attribute written of something a library class may be reached from
    (``collections.Counter.most_common = f``, ``C = collections.Counter; C.x = f``, ``type(counts()).x = f``).
    The test's own objects (its classes' instances, ``SimpleNamespace()``, a helper's parameter given one) and a
    fresh ``random.Random()`` are not library state. Not seen: code the test builds at run time (``exec``)."""
    facts = _facts(tree)
    found = [name for name in facts.state_names if name not in RANDOM_FUNCTIONS]
    if found:
        return f"the test uses {min(found)}, state of the interpreter the sandboxed program does not share"
    if facts.process:
        return f"the test changes {facts.process}, which the sandboxed program does not share"
    if facts.library_write:
        return "the test sets an attribute of a library object, which the sandboxed program does not share"
    return ""


def random_state(tree: ast.Module) -> str:
    """Why the test seeds or reads the state of random's (or numpy's) hidden generator ('' when it does not): a
    program drawing from it would draw from another generator than the test's."""
    found = [name for name in _facts(tree).state_names if name in RANDOM_FUNCTIONS]
    return f"the test uses {min(found)}, random's generator the sandboxed program does not share" if found else ""


def reads_random(tree: ast.Module) -> bool:
    """Whether the test may draw from random's or numpy's module generator (it names or imports either)."""
    return bool(_facts(tree).random_read)


class _Facts:
    def __init__(self, tree: ast.Module):
        self.nodes = list(ast.walk(tree))  # walked once: every rule reads this list, or its nodes of some types
        kinds = {kind: [] for kind in _KINDS}
        for node in self.nodes:
            kinds.get(type(node), []).append(node)
        self.bound: dict[str, list] = {}  # name -> the values (or kinds) binding it
        for node in (node for kind in _BINDERS for node in kinds[kind]):
            for name, value in _bindings(node):
                self.bound.setdefault(name, []).append(value)
        self.state_names = set(self._state_names(kinds))
        changers = (node for kind in (ast.Attribute, ast.Subscript, ast.Call) for node in kinds[kind])
        self.process = next((what for node in changers for what in [_process_change(node)] if what), "")
        named = (node for kind in (ast.Name, ast.Import, ast.ImportFrom) for node in kinds[kind])
        self.random_read = any(_names_random(node) for node in named)
        self.library_write = library_write(self.nodes, self.bound)

    def _state_names(self, kinds: dict):
        for node in (
            node for kind in (ast.ImportFrom, ast.Name, ast.Attribute, ast.Subscript, ast.Call) for node in kinds[kind]
        ):
            if isinstance(node, ast.ImportFrom):
                star = (node.module or "").partition(".")[0] in _STAR_MODULES
                yield from (a.name for a in node.names if a.name in STATE_FUNCTIONS or (a.name == "*" and star))
            elif isinstance(node, ast.Name) and node.id in _SETTERS:
                yield node.id
            elif isinstance(node, ast.Attribute) and node.attr in STATE_FUNCTIONS and not self._fresh(node.value):
                yield node.attr
            elif isinstance(node, ast.Subscript) and _state_string(node.slice):
                yield node.slice.value
            elif isinstance(node, ast.Call) and not self._program_function(node.func):
                yield from (a.value for a in [*node.args, *(k.value for k in node.keywords)] if _state_string(a))
                yield from self._computed_lookup(node)

    def _computed_lookup(self, call: ast.Call):
        """``getattr(module, name)`` with a name computed at run time (``'dees'[::-1]``): any function of it."""
        named = isinstance(call.func, ast.Name) and call.func.id in ("getattr", "hasattr") and len(call.args) > 1
        if named and not isinstance(call.args[1], ast.Constant) and self._module(call.args[0]):
            yield "getattr"

    def _module(self, node: ast.AST) -> bool:
        """Whether ``node`` may be a module: a name an import binds, or a standard module the test did not import."""
        if isinstance(node, ast.Call) and self._program_function(node.func):
            return False  # a program function's result: plain data
        if not isinstance(node, ast.Name):
            return not isinstance(node, ast.Constant)
        values = self.bound.get(node.id)
        return node.id in sys.stdlib_module_names if values is None else any(v in ("import", "from") for v in values)

    def _program_function(self, func: ast.AST) -> bool:
        """A name the test never binds and no builtin: the program's (its results cross as plain data)."""
        return isinstance(func, ast.Name) and free_name(func.id, self.bound)

    def _fresh(self, base: ast.AST) -> bool:
        """Whether ``base`` holds no module: a name every binding of which is a fresh generator (``_FRESH``) or a
        program function's result, or a program function itself."""
        if not isinstance(base, ast.Name):
            return False
        values = self.bound.get(base.id)
        if values is None:
            return free_name(base.id, self.bound)  # not a module the judge gives the test (``random`` unimported)
        return all(
            isinstance(v, ast.Call) and (self._program_function(v.func) or self._fresh_class(v.func)) for v in values
        )

    def _fresh_class(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Attribute):
            return func.attr in _FRESH
        return isinstance(func, ast.Name) and func.id in _FRESH and all(v == "from" for v in self.bound[func.id])


_BINDERS = (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension, ast.AugAssign)
_BINDERS += (ast.withitem, ast.ImportFrom, ast.Import, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg)
_BINDERS += (ast.ExceptHandler, ast.Global, ast.Nonlocal)
_KINDS = frozenset(_BINDERS + (ast.Name, ast.Attribute, ast.Subscript, ast.Call))


@functools.lru_cache(maxsize=64)  # keyed by the tree object: state_change and random_state read one analysis
def _facts(tree: ast.Module) -> _Facts:
    return _Facts(tree)


def _bindings(node: ast.AST):
    """(name, value) for each name ``node`` binds: the assigned value where one expression is bound whole, else
    a kind ("from": a ``from`` import, "other")."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        targets = getattr(node, "targets", None) or [node.target]
        for target in targets:
            whole = isinstance(target, ast.Name)
            yield from ((name, node.value if whole else "other") for name in bound_names(target))
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.AugAssign)):
        yield from ((name, "other") for name in bound_names(node.target))
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield from ((name, "other") for name in bound_names(node.optional_vars))
    elif isinstance(node, ast.ImportFrom):
        yield from ((a.asname or a.name, "from") for a in node.names)
    elif isinstance(node, ast.Import):
        yield from (((a.asname or a.name).partition(".")[0], "import") for a in node.names)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name, "other"
    elif isinstance(node, ast.arg):
        yield node.arg, "other"
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name, "other"
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from ((name, "other") for name in node.names)


def _state_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STATE_FUNCTIONS


def _process_part(node: ast.AST) -> str:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name if name in _PROCESS else ""


def _process_change(node: ast.AST) -> str:
    """``environ``/``argv`` when ``node`` assigns it, one of its items, or calls a method changing it."""
    if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
        return _process_part(node)
    if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
        return _process_part(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
        return _process_part(node.func.value)
    return ""


def _names_random(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("random", "numpy", "np")
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
    modules += [a.name for a in node.names] if isinstance(node, ast.Import) else []
    return any(m.partition(".")[0] in ("random", "numpy") for m in modules)
