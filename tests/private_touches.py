"""Where trl_ext touches TRL's or transformers' private names, read from the source (``ast``) and the classes.

A private name is ``_x`` (not ``__x__``). TRL's private names are every ``_x`` that TRL's source (all of it) and
transformers' Trainer, TrainingArguments, callbacks, model and config base classes define or read. A touch is:
- a class of trl_ext that derives from a TRL/transformers class and defines (a method override or a class attribute)
  a private name one of those bases has;
- an attribute read or write ``obj._x``, ``super()._x(...)``, or ``getattr``/``hasattr``/``setattr(obj, "_x")``, of
  a TRL private name that no trl_ext class of its own (not derived from TRL/transformers) defines.
Used by tests/test_layout.py to hold the rule that every touch lives in a ``trl_ext/trainers/_trl*`` module.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

import transformers
import trl

from tests.import_graph import module_graph, modules

TRANSFORMERS_FILES = ("trainer.py", "trainer_callback.py", "trainer_pt_utils.py", "trainer_utils.py",
                      "training_args.py", "modeling_utils.py", "configuration_utils.py",
                      "tokenization_utils_base.py")  # fmt: skip
THIRD_PARTY = ("trl", "transformers")
ATTRIBUTE_FUNCTIONS = ("getattr", "hasattr", "setattr", "delattr")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_and_read(tree: ast.AST) -> Iterator[str]:
    """Private names a source defines in a class body, or reads or writes as an attribute."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item.name
                elif isinstance(item, ast.Assign | ast.AnnAssign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    yield from (target.id for target in targets if isinstance(target, ast.Name))


def third_party_private_names() -> set[str]:
    return set(_third_party_private_names())


@functools.cache  # the tests read these several times; TRL's source and trl_ext's classes do not change meanwhile
def _third_party_private_names() -> frozenset[str]:
    files = list(Path(trl.__file__).parent.rglob("*.py"))
    files += [Path(transformers.__file__).parent / name for name in TRANSFORMERS_FILES]
    names = set()
    for path in files:
        names.update(name for name in _defined_and_read(ast.parse(path.read_text())) if is_private(name))
    return frozenset(names)


def _is_third_party(cls: type) -> bool:
    return cls.__module__.split(".")[0] in THIRD_PARTY


def _own_classes(module: str) -> list[type]:
    loaded = importlib.import_module(module)
    return [obj for obj in vars(loaded).values() if inspect.isclass(obj) and obj.__module__ == module]


def _self_assigned(cls: type) -> set[str]:
    """Private names a class's methods assign on ``self``."""
    try:
        tree = ast.parse(inspect.getsource(cls).lstrip())  # a nested class's source is indented
    except (OSError, TypeError, SyntaxError):
        return set()
    return {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
    }


def _imports_third_party(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] in THIRD_PARTY for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in THIRD_PARTY:
            return True
    return False


def _static_class_names(path: Path) -> set[str]:
    """Private names the classes of a module that imports neither TRL nor transformers define (all its own)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            names.update(_defined_and_read(ast.Module(body=node.body, type_ignores=[])))
    return {name for name in names if is_private(name)}


def trl_users() -> set[str]:
    """Modules that import TRL or transformers, directly or through other trl_ext modules: only their classes can
    derive from TRL's."""
    return set(_trl_users())


@functools.cache
def _trl_users() -> frozenset[str]:
    graph, paths = module_graph(), modules()
    users = {module for module, path in paths.items() if _imports_third_party(path)}
    grown = True
    while grown:
        grown = False
        for module, targets in graph.items():
            if module not in users and targets & users:
                users.add(module)
                grown = True
    return frozenset(users)


def classes_of_trl_users() -> list[tuple[str, type]]:
    """(module, class) of every class defined in a module that uses TRL or transformers (those are imported; the
    others, e.g. the sandbox's scripts, are read as source only)."""
    return list(_classes_of_trl_users())


@functools.cache
def _classes_of_trl_users() -> tuple[tuple[str, type], ...]:
    users = trl_users()
    return tuple(
        [
            (module, cls)
            for module in modules()
            if not module.endswith("__main__") and module in users
            for cls in _own_classes(module)
        ]
    )


def is_trl_module(module: str) -> bool:
    """A ``trl_ext/trainers/_trl*`` module: the home of every touch."""
    return module.startswith("trl_ext.trainers._trl")


def _composed() -> list[tuple[type, type]]:
    """(class, TRL-derived class it is part of): every trl_ext class in the MRO of a trl_ext class derived from
    TRL/transformers, mixins included (a mixin's method overrides TRL's once mixed in)."""
    pairs = []
    for _, cls in classes_of_trl_users():
        if any(_is_third_party(base) for base in cls.__mro__[1:]):
            pairs.extend((part, cls) for part in cls.__mro__ if not _is_third_party(part) and part is not object)
    return pairs


def overrides() -> list[tuple[str, str, str]]:
    """(module, class, name): a trl_ext class, or a mixin of one, defining a private name that one of the class's
    TRL/transformers bases has (an override, or a class attribute TRL reads)."""
    found = set()
    for part, cls in _composed():
        bases = [base for base in cls.__mro__ if _is_third_party(base)]
        for name in vars(part):
            if is_private(name) and any(hasattr(base, name) for base in bases):
                found.add((part.__module__, part.__name__, name))
    return sorted(found)


def own_private_names(third_party: set[str]) -> set[str]:
    """Private names that trl_ext's own classes (never part of a TRL-derived class, outside ``_trl*``) define:
    reading those is no touch."""
    names = set()
    users = trl_users()
    for module, path in modules().items():
        if module not in users and not is_trl_module(module):
            names.update(_static_class_names(path))
    composed = {part for part, _ in _composed()}
    for module, cls in classes_of_trl_users():
        if cls not in composed and not is_trl_module(module):
            names.update(name for name in [*vars(cls), *_self_assigned(cls)] if is_private(name))
    return names & third_party


def attribute_touches(
    third_party: set[str], own: set[str], paths: dict[str, Path] | None = None
) -> list[tuple[str, int, str]]:
    """(module, line, name): a read or write of a TRL/transformers private attribute (in trl_ext's modules, or in
    ``paths``)."""
    found = []
    for module, path in (paths or modules()).items():
        for node in ast.walk(ast.parse(path.read_text())):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ATTRIBUTE_FUNCTIONS
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                name = node.args[1].value
            if isinstance(name, str) and is_private(name) and name in third_party - own:
                found.append((module, node.lineno, name))
    return found
