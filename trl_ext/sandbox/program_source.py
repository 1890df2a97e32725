"""What the judge trusts about the program's classes and module names: read from the program's SOURCE (its AST, on
the trainer's side), never from what the program's process writes.

The harness that describes the program (its exception classes' chains, the builtin names its module keeps) runs in
the program's own process, after it: a program can reach the harness's globals (``sys._getframe()``) and rewrite
what it says. So the judge takes class relations and rebound builtins from the source, and what the program's
process sends can only ADD refusals (red team R8b-1). ``program_facts`` gives, as plain data for the evaluation
worker (``program_exceptions`` and ``live`` check each class chain against it):

- ``"dynamic"``: why the source cannot be read for this ('' when it can): the program reaches namespaces, frames
  or classes by code the AST does not show (``globals()``, ``exec``, ``setattr``, ``sys._getframe``, a write of
  ``__bases__``, ``import builtins``...). Then no class chain and no builtin read is trusted: fail-closed.
- ``"rebound"``: the builtin names the program's module binds (top level, or ``global`` in a function); ``"*"``
  where a star import binds names the judge cannot list.
- ``"classes"``: {qualname: [bases, members]} for each ``class`` statement of a qualname met once, with no decorator
  nor keyword (``metaclass=``); each base "b:NAME" (a builtin exception or ``object``, a name the program never
  binds), "c:QUALNAME" (the program's one class of that name, which the program binds nowhere else) or None (an
  expression, an import: not decidable here, so a chain naming it is refused); ``members``: the names its body
  binds (methods, class attributes). A qualname met more than once maps to None.
- ``"functions"``: the names a ``def`` of the module's binds (a test's name the program's process describes as an
  exception class but the source defines as a function is refused).
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
from collections import Counter

from trl_ext.sandbox.assert_plan import program_nodes

_EXCEPTION_NAMES = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
_BUILTIN_BASES = _EXCEPTION_NAMES | {"object"}
# names whose call or read lets code reach a namespace, a frame or a class's relations the AST does not show
_DYNAMIC_NAMES = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "compile", "__import__", "setattr", "delattr", "__builtins__"}
    | {"breakpoint", "__build_class__", "settrace", "setprofile", "_current_frames"}
)
_DYNAMIC_ATTRIBUTES = frozenset(
    {"_getframe", "currentframe", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "tb_frame", "tb_next"}
    | {"gi_frame", "cr_frame", "ag_frame", "__dict__", "__bases__", "__class__", "__globals__", "__builtins__"}
    | {"__code__", "__setattr__", "__delattr__", "__getattribute__", "__mro__", "__subclasses__", "__traceback__"}
    | {
        "modules",
        "builtins",
        "__main__",
        "register",
        "__init_subclass__",
        "__subclasshook__",
        "__instancecheck__",
        "__subclasscheck__",
    }
)
_DYNAMIC_MODULES = frozenset({"builtins", "inspect", "ctypes", "gc", "importlib", "__main__", "traceback", "pickle"})
_DYNAMIC_MODULES |= {"marshal", "copyreg", "runpy", "pkgutil", "code", "codeop"}
_GETTERS = frozenset({"getattr", "hasattr", "attrgetter", "methodcaller"})  # a name given as a string
_ANY_NAME = frozenset({"attrgetter", "methodcaller"})  # passed around under any name: refused wherever they are


def program_facts(program: str) -> dict:
    """The facts above as plain data (a copy: the caller may keep it in a task). A program that does not parse
    is all "dynamic"."""
    return _facts(program)


@functools.lru_cache(maxsize=512)
def _facts_cached(program: str) -> tuple:
    nodes = program_nodes(program)  # every reader walks these, in ast.walk's order
    if nodes is None:
        return ("the program's source does not parse", (), (), ())
    tree = nodes[0]  # the module: ast.walk's first node
    try:
        bindings = _bindings(nodes)
        why = _dynamic(nodes, bindings)
        rebound = _module_bindings(tree, nodes, bindings)
        classes = _classes(tree, bindings)
    except RecursionError:  # a tree nested past the walker's depth: nothing is read from it
        return ("the program's source is nested too deeply to read", (), (), ())
    functions = sorted({node.name for node in _module_statements(tree) if isinstance(node, _FUNCTIONS)})
    return (why, tuple(sorted(rebound)), tuple(classes.items()), tuple(functions))


def _facts(program: str) -> dict:
    why, rebound, classes, functions = _facts_cached(program)
    facts = {"dynamic": why, "rebound": list(rebound), "classes": {k: _copy(v) for k, v in classes}}
    return {**facts, "functions": list(functions)}


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, those under ``if``/``try``/``for``... included (not inside a def or class)."""
    return [node for statement in tree.body for node in _statements(statement)]


def _copy(fact: tuple | None) -> list | None:
    return None if fact is None else [list(fact[0]), list(fact[1])]


def _dynamic(nodes: tuple[ast.AST, ...], bindings: Counter) -> str:
    """Why the program may change its namespace, a class's relations or the builtins by code the AST does not
    show ('' when it cannot): a fail-closed list (a right program using one is refused, never a wrong one passed).
    ``nodes``: the program's, in ``ast.walk``'s order (the first reason met is the one given)."""
    called = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
    # an attribute written under a builtin's or a class's name on a subscript or call may be the builtins module's
    # or the program's module's (``sys.modules['builtins'].len = ...``); ``self.head.next = node`` is an object's:
    # a module reached by names needs a route this function refuses (an import, ``modules``, ``builtins``...)
    global_names = set(dir(builtins)) | {n.name for n in nodes if isinstance(n, ast.ClassDef)}
    modules = _standard_modules(nodes, bindings)
    for node in nodes:
        if isinstance(node, ast.Attribute) and _standard_function(node, modules):
            continue  # ``re.compile``, ``ast.literal_eval``: a standard module's own function, never the builtin
        stored = isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load)
        if stored and node.attr in global_names and not isinstance(node.value, (ast.Name, ast.Attribute)):
            return f"writes an attribute named {node.attr}"
        name = node.id if isinstance(node, ast.Name) else node.name if isinstance(node, ast.alias) else ""
        name = getattr(node, "attr", name)
        if isinstance(node, ast.alias) and name in _DYNAMIC_ATTRIBUTES:  # ``from sys import _getframe``
            return f"imports {name}"
        if name in _DYNAMIC_NAMES or (name in _GETTERS and (id(node) not in called or name in _ANY_NAME)):
            return f"uses {name}"
        if isinstance(node, ast.Attribute) and (
            node.attr in _DYNAMIC_ATTRIBUTES or (not isinstance(node.ctx, ast.Load) and _dunder(node.attr))
        ):
            return f"uses the attribute {node.attr}"
        # ``case type(__subclasses__=s)`` reads the attribute as ``type.__subclasses__`` would (red team R10J-3)
        read = [attr for attr in getattr(node, "kwd_attrs", ()) if attr in _DYNAMIC_ATTRIBUTES]
        if isinstance(node, ast.MatchClass) and read:
            return f"uses the attribute {read[0]} in a class pattern"
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _dynamic_import(node):
            return "imports a module that reaches namespaces, frames or classes"
        if isinstance(node, ast.Call) and _dynamic_call(node):
            return "makes a class or reads an attribute by a name the source does not show"
        if isinstance(node, ast.Constant) and type(node.value) is str and node.value in _DYNAMIC_ATTRIBUTES:
            return f"names the attribute {node.value}"
    return ""


def _standard_modules(nodes: tuple[ast.AST, ...], bindings: Counter) -> set[str]:
    """Names the program binds only by ``import M`` (``as N``) of a standard module that reaches no namespace
    (R9b-4): none of them holds a builtin of ``_DYNAMIC_NAMES`` under that name (tests/sandbox/test_frame_hook.py
    checks it) and the ones that reach frames (``sys.settrace``...) are denied in the sandbox by the harness's
    audit hook."""
    imported: Counter = Counter()
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.partition(".")[0]
                standard = root in sys.stdlib_module_names and root not in _DYNAMIC_MODULES
                imported[(alias.asname or root) if standard and (alias.asname or "." not in alias.name) else ""] += 1
    return {name for name, count in imported.items() if name and bindings[name] == count}


def _standard_function(node: ast.Attribute, modules: set[str]) -> bool:
    return node.attr in _DYNAMIC_NAMES and not _dunder(node.attr) and getattr(node.value, "id", None) in modules


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _dynamic_import(node: ast.Import | ast.ImportFrom) -> bool:
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(name.partition(".")[0] in _DYNAMIC_MODULES for name in names)


def _dynamic_call(node: ast.Call) -> bool:
    """``type(name, bases, namespace)``, or ``getattr``/``attrgetter``... of a name that is not a plain string
    constant (or a dunder one)."""
    func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    if func == "type":
        return len(node.args) != 1 or bool(node.keywords)
    if func not in ("getattr", "hasattr"):
        return False
    names = node.args[1:2] if len(node.args) > 1 and not node.keywords else [node]
    return any(not (isinstance(n, ast.Constant) and type(n.value) is str and not _dunder(n.value)) for n in names)


def _bindings(nodes: tuple[ast.AST, ...]) -> Counter:
    """How often each name is bound anywhere in the program (any scope; ``global``/``nonlocal`` and star imports
    count): a name bound once, by its ``class`` statement, is that class wherever it is read. "." + name: how often
    an attribute of that name is written (``x.name = ...``, ``del x.name``)."""
    count: Counter = Counter()
    for node in nodes:
        count.update(_bound_by(node))
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            count["." + node.attr] += 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            count[node.name] += 1
        elif isinstance(node, ast.arg):
            count[node.arg] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            count.update(node.names)
    return count


def _bound_by(node: ast.AST) -> list[str]:
    """The names ``node`` itself binds in the scope it runs in (an assignment's name, an import, ``except ... as``,
    a ``match`` capture); definitions, arguments and ``global`` are counted by the callers."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        bound: list[str] = []
        for alias in node.names:
            bound += _star_names(node) if alias.name == "*" else [(alias.asname or alias.name).split(".")[0]]
        return bound
    name = getattr(node, "rest" if isinstance(node, ast.MatchMapping) else "name", None)
    is_capture = isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping))
    return [name] if is_capture and type(name) is str else []


def _star_names(node: ast.ImportFrom) -> list[str]:
    """The names ``from MODULE import *`` binds, read from the module where this process has already loaded it
    (the sandbox's interpreter is this one; nothing is imported here: importing runs the module's code); ["*"]
    (every name) otherwise."""
    module = sys.modules.get(node.module or "") if not node.level else None
    if module is None:
        return ["*"]
    namespace = vars(module)
    exported = namespace.get("__all__")
    if isinstance(exported, (list, tuple)) and all(type(name) is str for name in exported):
        return list(exported)
    return [name for name in namespace if type(name) is str and not name.startswith("_")]


def _module_bindings(tree: ast.Module, nodes: tuple[ast.AST, ...], bindings: Counter) -> set[str]:
    """The builtin names the module's namespace may hold another object for: bound at the top level (outside
    functions and classes; a comprehension's ``:=`` too), declared ``global`` anywhere, or "*" (a star import
    of a module the judge cannot list)."""
    names: set[str] = {"*"} if bindings["*"] else set()
    for node in nodes:
        if isinstance(node, ast.Global):
            names.update(node.names)
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(
                node.decorator_list + getattr(node, "bases", []) + [k.value for k in getattr(node, "keywords", [])]
            )
            stack.extend(_defaults(getattr(node, "args", None)))
            continue
        if isinstance(node, ast.Lambda):  # its defaults run here, its body in a scope of its own
            stack.extend(_defaults(node.args))
            continue
        names.update(_bound_by(node))
        stack.extend(ast.iter_child_nodes(node))
    return names & (set(dir(builtins)) | {"*"})


def _defaults(arguments: ast.arguments | None) -> list[ast.AST]:
    return [] if arguments is None else [d for d in arguments.defaults + arguments.kw_defaults if d is not None]


def _classes(tree: ast.Module, bindings: Counter) -> dict[str, tuple | None]:
    """{qualname: (bases, members) or None} of the program's ``class`` statements (see the module's docstring)."""
    statements: dict[str, list[ast.ClassDef]] = {}
    by_name: dict[str, list[str]] = {}
    for qualname, node in _qualnames(tree.body, ""):
        statements.setdefault(qualname, []).append(node)
        by_name.setdefault(node.name, []).append(qualname)
    # each body counted once: a dotted base looks its names up here, never walks a body again (red team R10J-5:
    # thousands of bases ``X.Y`` re-walking a long body of ``X`` cost seconds of the trainer's CPU)
    bodies = {qualname: Counter(_body_bindings(nodes[0])) for qualname, nodes in statements.items() if len(nodes) == 1}
    facts: dict[str, tuple | None] = {}
    for qualname, nodes in statements.items():
        node = nodes[0]
        if len(nodes) > 1 or node.decorator_list or node.keywords:
            facts[qualname] = None
            continue
        bases = tuple(_base(base, bindings, by_name, bodies) for base in node.bases) or ("b:object",)
        facts[qualname] = (bases, tuple(sorted(bodies[qualname])))
    return facts


def _qualnames(body: list[ast.stmt], prefix: str):
    """(qualname, statement) of every ``class`` statement, as CPython names them (``A.B``, ``f.<locals>.C``)."""
    for statement in body:
        for node in _statements(statement):
            if isinstance(node, ast.ClassDef):
                yield prefix + node.name, node
                yield from _qualnames(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from _qualnames(node.body, prefix + node.name + ".<locals>.")


def _statements(statement: ast.stmt):
    """``statement`` and the statements nested in it in the same scope (under ``if``, ``try``, ``for``...)."""
    stack = [statement]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))
            )


def _base(base: ast.expr, bindings: Counter, by_name: dict[str, list[str]], bodies: dict) -> str | None:
    if isinstance(base, ast.Attribute):
        return _dotted_base(base, bindings, bodies)
    if not isinstance(base, ast.Name):
        return None
    if base.id in _BUILTIN_BASES and not bindings[base.id] and not bindings["*"]:
        return "b:" + base.id
    classes = by_name.get(base.id, [])
    if len(classes) == 1 and bindings[base.id] == 1:  # bound only by its class statement
        return "c:" + classes[0]
    return None


def _dotted_base(base: ast.Attribute, bindings: Counter, bodies: dict[str, Counter]) -> str | None:
    """``Errors.B``: the program's class of that qualname, where ``Errors`` is bound once in the whole program (by
    its class statement), each later name once in its class's body, and none of them is ever written as an
    attribute (``Errors.B = ...``: ``bindings["." + name]``)."""
    names: list[str] = []
    node: ast.expr = base
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    names.reverse()
    if not isinstance(node, ast.Name) or bindings[node.id] != 1 or any(bindings["." + n] for n in names):
        return None
    qualname = node.id
    for name in names:
        if qualname not in bodies or bodies[qualname][name] != 1:  # one class statement, binding ``name`` once
            return None
        qualname += "." + name
    return "c:" + qualname if qualname in bodies else None


def _body_bindings(node: ast.ClassDef) -> list[str]:
    """Each binding the class body makes in its namespace, by name (a name bound twice is there twice)."""
    names: list[str] = []
    stack: list[ast.AST] = list(node.body)
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(child.name)
            continue
        if isinstance(child, ast.Lambda) or (isinstance(child, ast.AnnAssign) and child.value is None):
            continue
        names += _bound_by(child)
        stack.extend(ast.iter_child_nodes(child))
    return names
