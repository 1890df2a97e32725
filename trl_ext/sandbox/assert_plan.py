"""Which names of an assert test are the program's (judge side: the AST of the test and of its prefix)."""

from __future__ import annotations

import ast
import builtins
import functools
import symtable
import sys
import threading

from trl_ext.sandbox.program_random import program_state
from trl_ext.sandbox.replay import ASSERT_HOOK
from trl_ext.sandbox.test_state import random_state, reads_random, state_change

# CPython 3.11's ast.parse is not thread-safe: a garbage collection that switches threads while it builds the tree
# raises SystemError ("AST constructor recursion depth mismatch"), out of the reward; the code reward grades in threads
_AST_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time."""
    with _AST_LOCK:
        return ast.parse(source)


@functools.lru_cache(maxsize=64)
def program_tree(program: str) -> ast.Module | None:
    """The program's AST, parsed once for the judge's readers of one program (``program_source``, the random-state
    rule); None where it does not parse. Shared: readers only walk it."""
    try:
        return parse_python(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


@functools.lru_cache(maxsize=64)
def program_nodes(program: str) -> tuple[ast.AST, ...] | None:
    """Every node of ``program_tree``, in ``ast.walk``'s order (the module first), walked once for all its
    readers; None where the program does not parse."""
    tree = program_tree(program)
    return None if tree is None else tuple(ast.walk(tree))


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


_UNWATCHED = frozenset({"sys", "warnings", "builtins", "__main__"})  # the harness itself changes these per call


@functools.lru_cache(maxsize=4096)
def watched_modules(test: str, prefix: str | None) -> tuple[str, ...]:
    """The standard modules the test's side imports (the test, the prefix's imports) or reads without importing:
        the harness watches each for a change the program makes, which one interpreter would show the test (red team
        R10J-6), with their dotted names (``os.path``; ``from collections import abc`` gives ``collections.abc``, which the
    harness tries as a module)."""
    names: set[str] = set()
    for source in (test, prefix or ""):
        tree = parse_python(source)
        bound = _bound_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:  # a name may be a submodule
                names.update(
                    [node.module, *(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")]
                )
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
                names.add(node.id)
    top = {name: name.partition(".")[0] for name in names}
    return tuple(sorted(n for n in names if top[n] in sys.stdlib_module_names and top[n] not in _UNWATCHED))


def program_names(test: str, prefix: str | None, entry_point: str | None) -> tuple[list[str], list[str]]:
    """(the program's functions the test uses, standard modules it uses without importing them): names the test
    reads but neither defines nor imports, that are no builtins and not defined by ``prefix``; plus
    ``entry_point`` (without one, the last function ``prefix`` defines: the one the completion continues).
    The prefix's other definitions are the test's helpers, taken from the prefix, never from the program.
    Raises SyntaxError when ``test`` or ``prefix`` does not parse."""
    tree = parse_python(test)
    defined = _bound_names(tree) | set(dir(builtins))
    if prefix:
        prefix_tree = parse_python(prefix)
        stubs = [s.name for s in prefix_tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        entry_point = entry_point or (stubs[-1] if stubs else None)
        defined |= _bound_names(prefix_tree) - {entry_point}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    free = read - defined - {ASSERT_HOOK}
    modules = sorted(n for n in free if n in sys.stdlib_module_names)
    names = sorted((free - set(modules)) | ({entry_point} if entry_point else set()))
    return names, modules


def _global_reads(table: symtable.SymbolTable, names: set[str]) -> None:
    for child in table.get_children():
        if child.get_type() == "function":
            names.update(symbol.get_name() for symbol in child.get_symbols() if symbol.is_global())
        _global_reads(child, names)


def _imported(tree: ast.Module) -> dict[str, set[str]]:
    """What the program's module-level imports bind: name -> {"module:NAME", "MODULE.NAME"} (``replay_env._shared``)."""
    bound: dict[str, set[str]] = {}
    for node in tree.body:
        for alias in node.names if isinstance(node, ast.Import) else ():
            module = alias.name if alias.asname else alias.name.split(".")[0]
            bound.setdefault(alias.asname or module, set()).add("module:" + module)
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                found = {f"{node.module}.{alias.name}", f"module:{node.module}.{alias.name}"}
                bound.setdefault(alias.asname or alias.name, set()).update(found)
    return bound


def shadowed_names(program: str, bound: dict[str, str | None]) -> list[str]:
    """The names a test bound before calling the program (``replay_env``: its own functions, ``g = lambda: 2``,
    ``globals()['g'] = ...``) that the program's functions read as globals: in one interpreter they would read
    the test's objects, which the sandbox cannot give them; not where the program's own import binds the name to
    the object the test bound (both ``import math``). A program whose scopes cannot be read (it does not compile)
    shadows every name the test bound."""
    if not bound:
        return []
    names: set[str] = set()
    try:
        _global_reads(symtable.symtable(program, "solution.py", "exec"), names)
        read = names.intersection(bound)
        imported = _imported(parse_python(program)) if read else {}  # the tree only where a bound name is read
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return sorted(bound)
    return sorted(name for name in read if bound[name] not in imported.get(name, ()))


def refuse_shadowed(program: str, answer: dict) -> dict:
    """``answer`` (an evaluation's final one), or "unsupported" where the test bound names the program's functions
    read: one interpreter would give them the test's objects, which the sandbox cannot."""
    names = shadowed_names(program, answer.get("bound", {})) if answer["verdict"] in ("passed", "failed") else []
    if not names:
        return answer
    detail = f"the test binds {', '.join(names)[:200]}, which the program's functions read as globals"
    return {"verdict": "unsupported", "detail": detail}


# what a test can read of a function without calling it: in the evaluation the program's functions are the judge's
# stand-ins, whose code, defaults and signature are not the program's (red team round 6: `'sorted' not in
# f.__code__.co_names` passed a program using sorted())
_INTROSPECTION = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__wrapped__"})
_INTROSPECTING = frozenset({"inspect", "dis"})
# files do not cross between the test (the evaluation worker) and the program (its sandbox's scratch)
_FILES = frozenset({"tempfile", "shutil", "pathlib", "glob", "fileinput"})
_OS_FILES = frozenset({"path", "remove", "unlink", "listdir", "scandir", "stat", "lstat", "rename", "replace",
                       "mkdir", "makedirs", "rmdir", "removedirs", "walk", "access", "open", "chdir", "getcwd",
                       "fdopen", "truncate", "utime", "chmod", "link", "symlink", "readlink"})  # fmt: skip
# what opens a file whichever module it is read from (``io.open``, ``codecs.open``, ``io.FileIO``, ``gzip.open``,
# ``builtins.open``, ``from io import open``): red team R9-14
_OPENERS = frozenset({"open", "FileIO", "open_code", "fdopen"})
# modules the test reaches without importing them
_ALWAYS_MODULES = frozenset({"__builtins__", "io", "_io", "codecs", "os", "gzip", "bz2", "lzma", "builtins"})
# the judge's iterator of a program generator is no generator object: a test asking whether a result is one
_GENERATOR_TYPES = frozenset({"GeneratorType", "Generator", "AsyncGeneratorType", "AsyncGenerator"})


@functools.lru_cache(maxsize=4096)
def introspection(test: str) -> str:
    """Why ``test`` reads what only the program's own function object holds ('' when it does not): an attribute of
    ``_INTROSPECTION`` (by name or as a string, ``getattr(f, "__code__")``), or the ``inspect``/``dis`` modules."""
    nodes = list(ast.walk(parse_python(test)))
    modules = _ALWAYS_MODULES.union(*(_import_names(node) for node in nodes if isinstance(node, ast.Import)))
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION:
            what = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _INTROSPECTION:
            what = node.value
        elif _imported_module(node).partition(".")[0] in _INTROSPECTING:
            what = "the inspect or dis module"
        elif _type_name(node) in _GENERATOR_TYPES:
            what = "whether a result is a generator"
        elif _touches_files(node, modules):
            what = "files (they do not cross between the test and the program's sandbox)"
        else:
            continue
        return f"the test reads {what} of the program's functions, which the judge cannot give (it never runs them)"
    return ""


def _imported_module(node: ast.AST) -> str:
    if isinstance(node, ast.ImportFrom):
        return node.module or ""
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
    return next((name for name in names if name.partition(".")[0] in _INTROSPECTING), "")


def unsupported_plan(test: str, names: list[str], prefix: str | None = None) -> str:
    """Why an assert test cannot judge the program ('' when it can): it names none of its functions, or it reads
    what only the program's function objects hold (``introspection``), or state the program does not share. The
    prefix's helpers (its definitions other than the program's ``names``) run as the test's code (red team R9-5):
    they are read with the test, and the prefix's imports with them."""
    if not names:
        return "the test uses no function of the program (name it with `entry_point`)"
    side, helpers = _test_side(test, prefix, tuple(names))
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    helper_text = ast.unparse(ast.Module(body=[h for h in helpers if isinstance(h, defs)], type_ignores=[]))
    return introspection(test) or introspection(helper_text) or exception_identity(test) or state_change(side)


@functools.lru_cache(maxsize=256)
def _test_side(test: str, prefix: str | None, names: tuple[str, ...]) -> tuple[ast.Module, list[ast.stmt]]:
    """The code the judge runs as the test's, in one module (the prefix's helpers, then the test), and the helpers."""
    helpers = _prefix_helpers(prefix, list(names))
    return ast.Module(body=[*helpers, *parse_python(test).body], type_ignores=[]), helpers


@functools.lru_cache(maxsize=4096)
def _program_state(program: str) -> tuple[bool, bool]:
    nodes = program_nodes(program)
    if nodes is None:  # a program that does not parse may do anything
        return True, True
    try:
        return program_state(nodes)
    except RecursionError:
        return True, True


def program_refusal(program: str, test: str, names: list[str], prefix: str | None = None) -> str:
    """Why the test cannot judge this program ('' when it can) for state of random's generator: the test seeds or
    reads random's hidden generator and the program may draw from it (red team R9-3: a test seeding random to make
    its inputs judges a program that never draws), or the program seeds it and the test reads random: each
    interpreter has its own. (An int-digits limit the program lowers fails the call that leaves it so, in the
    harness: ``_harness_live._interpreter_changed``; a raised one is judged, R10bJ-8.)"""
    draws, seeds = _program_state(program)
    side = _test_side(test, prefix, tuple(names))[0] if draws else None
    if draws and random_state(side):
        return random_state(side)
    if seeds and reads_random(side):
        return "the program seeds random's generator, which the test's random does not share"
    return ""


def _is_import(node: ast.AST) -> bool:
    return isinstance(node, (ast.Import, ast.ImportFrom))


def _prefix_helpers(prefix: str | None, names: list[str]) -> list[ast.stmt]:
    """The prefix's top-level imports and its definitions that are not the program's (``names``): the judge runs
    those as the test's (the prefix's other top-level statements run in both interpreters)."""
    if not prefix:
        return []
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    body = parse_python(prefix).body
    bindings = (ast.Assign, ast.AnnAssign)  # read for what they bind (``R = random``), run in both interpreters
    return [
        s for s in body if _is_import(s) or isinstance(s, bindings) or (isinstance(s, defs) and s.name not in names)
    ]


def exception_identity(test: str) -> str:
    """Why ``test`` compares the program's exceptions by identity across records ('' when it does not): ``is``/
    ``is not`` where a side reads what a function of the test that returns a caught exception returns, or reads one
    caught exception (a name an ``except ... as`` binds, or a name bound from it: ``err = e``, ``c = e.__cause__``)
    while another side reads something else. Within one caught exception identity crosses (``c is
    e.__context__``), as it does for its ``args`` (the run's objects); ``type(...)``, ``e.__class__`` and a
    ``None``/``True``/
    ``False`` side compare no exception. The judge
    rebuilds a program's exception from each record, so one object raised twice is two objects here (red team
    R8-3): refused rather than judged either way."""
    nodes = list(ast.walk(parse_python(test)))  # walked once
    compares = [node for node in nodes if _identity_compare(node)]
    if not compares:  # nothing to refuse (most tests): no names to follow
        return ""
    roots = {node.name: {node.name} for node in nodes if isinstance(node, ast.ExceptHandler) and node.name}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    catchers = {f.name for f in nodes if isinstance(f, functions) and _returns_caught(f)}
    assigns = [node for node in nodes if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))]
    for _ in range(4):  # names bound to those (``err = e``, ``e1 = catch(f)``), a few steps deep
        for node in assigns:
            found = _roots(node.value, roots, catchers) if node.value is not None else set()
            targets = ast.Tuple(getattr(node, "targets", None) or [node.target], ast.Store())
            for target in (t for t in ast.walk(targets) if isinstance(t, ast.Name) and found):
                roots[target.id] = roots.get(target.id, set()) | found
    for node in compares:
        sides = [node.left, *node.comparators]
        found = [_roots(side, roots, catchers) for side in sides]
        union = set().union(*found)
        if union and ("" in union or len(union) > 1 or not all(found)):
            return "the test compares the program's exceptions by identity (is), which does not cross the sandbox"
    return ""


def _identity_compare(node: ast.AST) -> bool:
    """An ``is``/``is not`` comparison where no side is a ``None``/``True``/``False`` constant."""
    if not isinstance(node, ast.Compare) or not any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
        return False
    sides = [node.left, *node.comparators]
    return not any(isinstance(side, ast.Constant) and side.value in (None, True, False) for side in sides)


def _returns_caught(function: ast.AST) -> bool:
    caught = {node.name for node in ast.walk(function) if isinstance(node, ast.ExceptHandler) and node.name}
    returns = [node.value for node in ast.walk(function) if isinstance(node, ast.Return)]
    return any(isinstance(value, ast.Name) and value.id in caught for value in returns)


def _roots(side: ast.AST, roots: dict, catchers: set) -> set:
    """The caught exceptions ``side`` reads ("": one a catching function of the test returned), past ``type()``."""
    if isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id == "type":
        return set()
    if isinstance(side, ast.Attribute) and side.attr in ("args", "__class__"):  # the run's objects, numbered, and
        return set()  # the class (as ``type()``; the judge rebuilds the program's class once a run): identity crosses
    if isinstance(side, ast.Name):
        return set(roots.get(side.id, ()))
    if isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id in catchers:
        return {""}
    found: set = set()
    for child in ast.iter_child_nodes(side):
        found |= _roots(child, roots, catchers)
    return found


def _type_name(node: ast.AST) -> str:
    """The name ``node`` reads or imports (``types.GeneratorType``, ``GeneratorType``, ``from types import ...``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return next((alias.name for alias in getattr(node, "names", ()) if alias.name in _GENERATOR_TYPES), "")


def _import_names(node: ast.Import) -> set[str]:
    return {alias.asname or alias.name.partition(".")[0] for alias in node.names}


def _touches_files(node: ast.AST, modules: frozenset[str]) -> bool:
    """Whether ``node`` opens a file (``open`` read by name, an opener of ``_OPENERS`` read from one of
    ``modules`` or imported by name), uses ``os``'s file functions or imports a module about files."""
    if isinstance(node, ast.Name) and node.id == "open" and isinstance(node.ctx, ast.Load):
        return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
        return node.attr in _OPENERS or (node.value.id == "os" and node.attr in _OS_FILES)
    files = (_OS_FILES if node.module == "os" else _OPENERS) if isinstance(node, ast.ImportFrom) else ()
    if any(alias.name in files or alias.name == "*" and node.module == "os" for alias in getattr(node, "names", ())):
        return True
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
    names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
    return any(name.partition(".")[0] in _FILES or name == "os.path" for name in names)
