"""The modules a test may change around the program's calls, in an assert-test evaluation (``replay_env.py``):
before every call, a test that has changed a module the program's own code may read (an attribute, its namespace
written directly, a module replaced in ``sys.modules``) and not put it back is refused, as the sandboxed program
cannot see the change that one interpreter would show it.

Each check costs O(1) a call while nothing changed (one C comparison of every loaded module's namespace version):
a module's attribute assignment is noted by ``_Watched``; a namespace (every module loaded before the evaluation,
those the test's globals name) and ``sys.modules`` are compared entry by entry only when their dict's version moved (``dict_versions.py``: every way of changing a dict moves it, C code included),
and a namespace found as it should be is not compared again until its version moves again. Where versions cannot
be read, every call compares every entry.

Stdlib only: ``replay.py`` loads this file by its path in the evaluation worker, as it loads ``plain_data.py``.
"""

from __future__ import annotations

import builtins
import contextlib
import operator
import sys
import types
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox import dict_versions
else:  # the evaluation worker: loaded by its path (``replay.py``), after dict_versions.py
    dict_versions = sys.modules["trl_ext_dict_versions"]


class Unsupported(Exception):
    """The test does something around a call that cannot cross the sandbox boundary."""


_UNCHECKED = frozenset({"sys", "warnings", "__main__"})
# builtins the checks use, as they were: a test may patch builtins (which is what they look for)
_any, _isinstance, _getattr, _type, _len, _id = any, isinstance, getattr, type, len, id
_all, _is, _callable = all, operator.is_, callable
_MISSING = object()


_TOUCHED: dict[tuple[int, str], tuple[Any, str, Any]] = {}  # (id(module), name) -> (module, name, value before)
_EVALUATING: list[bool] = []  # [True] while an evaluation runs: only then are a module's changes noted


class _Watched(types.ModuleType):
    """A module whose attribute assignments and deletions are noted with the value before (``ModuleChecks``),
    while an evaluation runs."""

    def __setattr__(self, name: str, value: Any) -> None:
        if _EVALUATING:  # its class too: a module made a plain one again would note nothing more
            before = _type(self) if name == "__class__" else self.__dict__.get(name, _MISSING)
            _TOUCHED.setdefault((id(self), name), (self, name, before))
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if _EVALUATING:
            _TOUCHED.setdefault((id(self), name), (self, name, self.__dict__.get(name, _MISSING)))
        super().__delattr__(name)


def _watch(module: types.ModuleType) -> bool:
    """Make ``module`` a ``_Watched`` one; False where its class cannot change."""
    try:
        module.__class__ = _Watched
    except TypeError:
        return False
    return True


def watch_modules() -> None:
    """Watch every module loaded now, for good: an evaluation worker calls it once before it forks a process per
    evaluation, so that each evaluation finds them watched instead of changing (and putting back) the class of
    every module itself. Changes are noted only while an evaluation runs (``ModuleChecks.start`` to ``stop``)."""
    for name, module in list(sys.modules.items()):
        if name not in _UNCHECKED and _type(module) is types.ModuleType:
            _watch(module)
    remember_modules()


# each module's namespace and ``sys.modules`` as loaded, before any evaluation: a write to a module's __dict__ (or
# vars(), or mock.patch.dict) or a module replaced in sys.modules bypasses ``_Watched`` (``_check_namespaces``)
_PRISTINE: dict[int, tuple[types.ModuleType, dict]] = {}
_PRISTINE_MODULES: dict[str, Any] = {}
_PRISTINE_ENTRIES: list[tuple] = [(), ()]  # sys.modules' names and modules as loaded, "__main__" left out
# id(module) -> (view of its namespace's version, the version as remembered: equal, it is as loaded), for the
# modules remembered; made before the worker forks (every evaluation finds them). Looked up by id() only where a
# namespace moved: the worker's audit hook sees every id() call
_MODULE_VERSIONS: dict[int, tuple[Any, int]] = {}
_MODULES_VERSION: list = [None, None, None]  # [sys.modules as remembered, a view of its version, that version]
# (name, module) of sys.modules as remembered where the module is watched for good (or never is): not scanned again
_SETTLED: set[tuple[str, Any]] = set()
# every module remembered but ``_UNCHECKED``: [modules], a function reading their namespaces' versions as a tuple
# (``dict_versions.reader``; None: versions cannot be read here), (the versions as remembered); compared before
# every call (``ModuleChecks._check_loaded``)
_LOADED: list = [[], None, ()]


def remember_modules() -> None:
    _PRISTINE_MODULES.clear()
    _PRISTINE_MODULES.update(sys.modules)
    names = tuple(name for name in _PRISTINE_MODULES if name != "__main__")
    _PRISTINE_ENTRIES[:] = [names, tuple(_PRISTINE_MODULES[name] for name in names)]
    _PRISTINE.clear()
    _MODULE_VERSIONS.clear()
    _SETTLED.clear()
    for name, module in _PRISTINE_MODULES.items():
        if name in _UNCHECKED or _type(module) is not types.ModuleType:
            with contextlib.suppress(TypeError):  # an unhashable entry: scanned every time
                _SETTLED.add((name, module))
    for module in _PRISTINE_MODULES.values():
        if _isinstance(module, types.ModuleType):
            _PRISTINE[id(module)] = (module, dict(module.__dict__))
            view = _view(module.__dict__)
            if view is not None:
                _MODULE_VERSIONS[id(module)] = (view, view.value)
    view = _view(sys.modules)
    _MODULES_VERSION[:] = [sys.modules, view, view and view.value]
    loaded = [
        m for name, m in _PRISTINE_MODULES.items() if name not in _UNCHECKED and _isinstance(m, types.ModuleType)
    ]
    views = [_MODULE_VERSIONS.get(id(module), (None,))[0] for module in loaded]
    if None in views:  # versions cannot be read: every entry of every module is compared before every call
        _LOADED[:] = [loaded, None, ()]
    else:
        read = dict_versions.reader(views)
        _LOADED[:] = [loaded, read, read()]


def remembered() -> bool:
    return bool(_PRISTINE_MODULES)


def _view(namespace: Any) -> Any:
    """A view of a dict's version (``dict_versions.watch``); None where it cannot be read."""
    return dict_versions.watch(namespace) if _type(namespace) is dict else None


def modules_version_now() -> int | None:
    """``sys.modules``' version now (None: it cannot be read, or ``sys.modules`` is another dict now)."""
    remembered_modules, view, _ = _MODULES_VERSION
    return view.value if view is not None and sys.modules is remembered_modules else None


def _changed_names(module: types.ModuleType, ours: set) -> list[str]:
    """The names of ``module``'s namespace that differ from what it held before the evaluation (by identity; not
    the evaluation's own patches ``ours``, nor a package's submodule the import system bound)."""
    entry = _PRISTINE.get(id(module))
    if entry is None or entry[0] is not module:
        return []
    now, before = module.__dict__, entry[1]
    if _len(now) == _len(before) and _all(map(_is, now.values(), before.values())) and list(now) == list(before):
        return []
    where, changed = _getattr(module, "__name__", "a module"), []
    for name in {*now, *before}:
        value = now.get(name, _MISSING)
        if value is before.get(name, _MISSING) or (id(module), name) in ours:
            continue
        if name[:1] == "_" and name[:2] != "__":  # a module's private cache, set by its own code (re._cache)
            continue
        old = before.get(name, _MISSING)
        if not (value is _MISSING or old is _MISSING or _callable(value) or _callable(old)):
            continue  # data a module's own code sets lazily through its globals (tempfile.tempdir)
        if _isinstance(value, types.ModuleType) and _getattr(value, "__name__", None) == f"{where}.{name}":
            continue
        changed.append(name)
    return changed


def _test_made(value: Any) -> bool:
    """Whether a module attribute is the test's own: a function or class it defined, or a ``unittest.mock``
    object."""
    if _isinstance(value, (types.FunctionType, type)) and _getattr(value, "__module__", None) == "__main__":
        return True
    module = _getattr(_type(value), "__module__", "")
    return _isinstance(module, str) and str.startswith(module, "unittest.mock")


class ModuleChecks:
    """One evaluation's checks of the modules (``Environment.check_modules``): ``start`` once the evaluation's
    own patches are made, ``check`` before each call, ``stop`` after the test."""

    def __init__(self, namespace: dict) -> None:
        self.namespace = namespace  # the test's globals
        self.ours: set[tuple[int, str]] = set()  # (id(owner), name) the evaluation patched itself (its clocks)
        self.watched: list[types.ModuleType] = []  # modules made ``_Watched`` by this evaluation
        self.scanned = False  # sys.modules scanned once: a module found since was imported by the test
        self.seen: set[tuple[str, Any]] = set()  # (name, module) of sys.modules scanned already
        self.modules_version: int | None = None  # sys.modules' version when last found as it should be
        self.namespace_version: int | None = None  # the test's globals' version when its modules were listed
        self.modules: list[types.ModuleType] = []  # builtins and the modules the test's globals name
        self.clean: dict[int, tuple[Any, int]] = {}  # id(module) -> (module, version of its namespace found clean)
        self.namespace_view = _view(namespace)  # one per evaluation: read without an id() (see _MODULE_VERSIONS)
        # ``_LOADED``'s versions as this evaluation began (before the test's prefix ran; changes an earlier
        # evaluation of this process left are not this test's), each moved on to one found clean since
        self.loaded_versions = _LOADED[1]() if _LOADED[1] is not None else ()

    def start(self, ours: set[tuple[int, str]], modules_before: int | None) -> None:
        """``ours``: (id(owner), name) the evaluation patched; ``modules_before``: the version of ``sys.modules``
        before the evaluation set ``sys.modules["__main__"]``, its only change of it."""
        self.ours = ours
        _TOUCHED.clear()
        if not remembered():  # not in a worker that remembered them before forking: as the evaluation found them
            remember_modules()
        if _len(self.loaded_versions) != _len(_LOADED[0]):  # remembered only now: as they are now
            self.loaded_versions = _LOADED[2]
        as_remembered = modules_before is not None and modules_before == _MODULES_VERSION[2]
        if as_remembered and len(_SETTLED) == len(_PRISTINE_MODULES):  # all watched for good: no scan to make
            self.scanned, self.modules_version = True, modules_version_now()
        _EVALUATING[:] = [True]
        self.check()  # as the evaluation found them

    def stop(self) -> None:
        _EVALUATING.clear()
        for module in self.watched:  # what ``watch_modules`` watched for good stays watched
            types.ModuleType.__setattr__(module, "__class__", types.ModuleType)  # not noted: no evaluation runs
        self.watched = []
        _TOUCHED.clear()

    def check(self) -> None:
        """Refuse a test that changed a module's attribute since the evaluation began and has not put it back
        (``builtins.sorted = None``, ``random.randint = lambda a, b: 4``, ``unittest.mock.patch``): in one
        interpreter the program's own code would see it. Modules are watched (``_Watched``); one the test
        imported since the last call is checked once for the test's own objects. ``sys`` (its streams cross) and
        ``warnings`` (``unittest`` rebinds its filters) are not watched. Raises ``Unsupported``."""
        modules_version = modules_version_now()
        moved = modules_version is None or modules_version != self.modules_version
        if moved:
            self._scan()
        for module, name, original in _TOUCHED.values():
            now = _type(module) if name == "__class__" else module.__dict__.get(name, _MISSING)
            where = _getattr(module, "__name__", "a module")
            submodule = _isinstance(now, types.ModuleType) and _getattr(now, "__name__", None) == f"{where}.{name}"
            if now is not original and not submodule:  # the import system binds a package's submodules
                raise Unsupported(f"the test changed {where}.{name}, which the program may use")
        self._check_namespaces()
        if moved:
            _check_replaced()
            self.modules_version = modules_version

    def _scan(self) -> None:
        """Watch the modules loaded since the last scan; refuse the test's own ``sys.modules`` entries and a module
        the test imported that holds the test's own objects."""
        items = sys.modules.items()
        try:
            new = items - _SETTLED - self.seen  # in C: what changed since (a module watched stays watched)
            found = list(filter(new.__contains__, items)) if new else []  # in sys.modules' order
        except TypeError:  # an unhashable entry of the test's: all of them
            new, found = None, list(items)
        for name, module in found:
            fresh = self.scanned and name not in _PRISTINE_MODULES and name not in _UNCHECKED
            made = not _isinstance(module, types.ModuleType) or _getattr(module, "__spec__", 1) is None
            if fresh and made and not _registered_by_parent(name, module):
                raise Unsupported(f"the test put its own sys.modules[{name!r}], which the program may import")
            if name in _UNCHECKED or _type(module) is not types.ModuleType or not _watch(module):
                continue
            self.watched.append(module)
            imported = self.scanned and not name.startswith("unittest.mock")  # imported by the test
            if imported and _any(_test_made(value) for value in module.__dict__.values()):
                raise Unsupported(f"the test patched the module {name}, which the program may use")
        self.scanned = True
        if new is not None:  # the test's own entries are looked at again every time, as they may change
            self.seen.update(item for item in new if item[0] in _PRISTINE_MODULES or item[0] in _UNCHECKED)

    def _check_namespaces(self) -> None:
        """Refuse a test that wrote a module's namespace directly (``builtins.__dict__['sorted'] = None``,
        ``vars(math)['sqrt'] = ...``, ``mock.patch.dict``) and has not put it back: ``builtins`` and the modules
        the test's globals name, compared with the modules as loaded where their version moved."""
        version = self.namespace_version_now()
        if version is None or version != self.namespace_version:
            values = [builtins, *(v for v in self.namespace.values() if _isinstance(v, types.ModuleType))]
            # the modules as remembered only: the others hold nothing to compare with (``_changed_names``)
            listed = [(module, _MODULE_VERSIONS.get(id(module))) for module in values]
            self.modules = [(m, versions) for m, versions in listed if _PRISTINE.get(id(m), (None,))[0] is m]
            self.namespace_version = version
        for module, versions in self.modules:
            version = None if versions is None else versions[0].value
            if version is not None:
                clean = version == versions[1] or self.clean.get(_id(module), (None, None)) == (module, version)
                if clean:
                    continue
            changed = _changed_names(module, self.ours)
            if changed:
                where = _getattr(module, "__name__", "a module")
                raise Unsupported(f"the test changed {where}.{changed[0]}, which the program may use")
            if version is not None:
                self.clean[_id(module)] = (module, version)
        self._check_loaded()

    def _check_loaded(self) -> None:
        """The same for every module loaded before the evaluation (``_LOADED``), named by the test or not: a
        write that bypasses ``_Watched`` (``vars(__import__('heapq'))[...]``, ``types.ModuleType.__setattr__``,
        ``sys.modules[m].__dict__.update``) moves its namespace's version (red team R8-10: a test forbidding
        ``heapq`` that patched it so passed a program using it). One C comparison a call while none moved."""
        modules, read, _ = _LOADED
        if read is None:
            moved = range(_len(modules))
        else:
            now = read()
            if now == self.loaded_versions:
                return
            moved = [k for k, (a, b) in enumerate(zip(now, self.loaded_versions)) if a != b]
        for k in moved:
            changed = _changed_names(modules[k], self.ours)
            if changed:
                where = _getattr(modules[k], "__name__", "a module")
                raise Unsupported(f"the test changed {where}.{changed[0]}, which the program may use")
        if read is not None:  # each moved one found clean: compared again once its version moves again
            self.loaded_versions = now

    def namespace_version_now(self) -> int | None:
        """The version of the test's globals now: equal readings mean no change in between; None: cannot tell."""
        return None if self.namespace_view is None else self.namespace_view.value


def _registered_by_parent(name: str, module: Any) -> bool:
    """A submodule an extension module made and registered itself as it was imported (``pyexpat.errors`` and
    ``pyexpat.model``, which ``import xml.etree.ElementTree`` loads: no spec), held by its parent under its name: the
    program's own import of the parent makes the same one (red team round 10b, R10bJ-4: a right program scored 0)."""
    parent, _, child = name.rpartition(".")
    owner = sys.modules.get(parent) if parent else None
    return (
        _type(module) is types.ModuleType
        and _isinstance(owner, types.ModuleType)
        and _getattr(owner, "__spec__", None) is not None
        and owner.__dict__.get(child) is module
    )


def _check_replaced() -> None:
    """Refuse a test that replaced a module in ``sys.modules`` and has not put it back."""
    names, loaded = _PRISTINE_ENTRIES  # compared in C: a loop here cost ~0.2 ms a call
    if _all(map(_is, map(sys.modules.get, names), loaded)):
        return
    for name, module in zip(names, loaded):
        if sys.modules.get(name) is not module:
            raise Unsupported(f"the test replaced sys.modules[{name!r}], which the program may import")
