"""Whether a dict changed since an earlier look, in O(1): the evaluation worker's checks of module namespaces and
``sys.modules`` before every call of the program (``module_watch.py``) compare a number instead of every entry.

CPython keeps such a number in every dict (PEP 509, ``ma_version_tag``): each change of the dict takes a new value
from one process-wide counter, whatever made it (an attribute assignment on a module, ``vars(m)[...]``,
``m.__dict__.update``, ``fn.__globals__[...]``, ``sys.modules`` item assignment, ``pop``, ``clear``, and C code such
as ``PyDict_SetItem`` or the import system), so an unchanged number means an unchanged dict. Python does not expose
it; it is read through ``ctypes`` at its place in the dict object, and only after a self-test on this interpreter
has shown that the place holds it (each way of changing a probe dict moves it, reading does not). Where the
self-test fails (another implementation, a CPython whose dicts are laid out otherwise, no ``ctypes``), ``watch``
returns None and the callers compare every entry, as they would without it.

Stdlib only: ``replay.py`` loads this file by its path in the evaluation worker, as it loads ``plain_data.py``.
"""

from __future__ import annotations

import functools
import operator
import sys
import types
from collections.abc import Callable
from typing import Any


def _view(namespace: dict) -> Any:
    """A ``ctypes`` view of the 64-bit word after the object header and ``ma_used`` of a dict (3.11: its version)."""
    import ctypes

    offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)
    return ctypes.c_uint64.from_address(id(namespace) + offset)


def _self_test() -> bool:
    """Whether ``_view`` reads a number that every change of a dict moves and nothing else does."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):  # 3.14 dropped the per-dict version
        return False
    try:
        probe = types.ModuleType("trl_ext_probe").__dict__
        probe["a"] = 1
        view = _view(probe)
    except (ImportError, AttributeError, OSError, TypeError, ValueError):
        return False
    module = types.ModuleType("trl_ext_probe_module")
    module_view = _view(module.__dict__)
    changes = [
        lambda: probe.__setitem__("a", object()),  # a value replaced: size and keys unchanged
        lambda: probe.update(b=2),
        lambda: probe.setdefault("c", 3),
        lambda: probe.pop("b"),
        lambda: probe.__delitem__("c"),
        lambda: exec("a = []", probe),  # the interpreter's own store into a namespace
        lambda: probe.popitem(),
        lambda: probe.clear(),
    ]
    for change in changes:
        before = view.value
        change()
        if view.value == before:
            return False
        before = view.value
        _ = (probe.get("a"), len(probe), list(probe.items()), "a" in probe)
        if view.value != before:
            return False
    before = module_view.value
    module.x = 1  # a module's attribute: its namespace
    return module_view.value != before


AVAILABLE = _self_test()


def watch(namespace: dict) -> Any:
    """A view whose ``.value`` is ``namespace``'s version now (equal readings: no change in between); None where
    versions cannot be read here. The caller keeps ``namespace`` alive as long as it reads the view."""
    return _view(namespace) if AVAILABLE else None


def reader(views: list) -> Callable[[], tuple]:
    """A function reading every view's version at once: ``tuple(view.value for view in views)``, by one read-only
    memoryview spanning their words, indexed in C (where that memoryview cannot be made or reads otherwise, the
    views one by one). It touches no view object: a forked evaluation copies none of their pages to count a
    reference, as ``.value`` on each would (the module watch reads ~250 versions before every call)."""
    import ctypes

    def one_by_one() -> tuple:
        return tuple(map(_VALUE, views))

    if not views:
        return tuple
    try:
        make = ctypes.pythonapi["PyMemoryView_FromMemory"]  # a function object of its own: its types set here
        make.restype, make.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
        addresses = [ctypes.addressof(view) for view in views]
        low = min(addresses)
        if any((address - low) % 8 for address in addresses):
            return one_by_one
        span = make(low, max(addresses) + 8 - low, 0x100).cast("Q")  # PyBUF_READ
    except (AttributeError, OSError, TypeError, ValueError):
        return one_by_one
    get = operator.itemgetter(*[(address - low) // 8 for address in addresses])
    read = functools.partial(get, span) if len(views) > 1 else lambda: (get(span),)
    return read if read() == one_by_one() else one_by_one


_VALUE = operator.attrgetter("value")
