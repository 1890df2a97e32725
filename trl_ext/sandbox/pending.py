"""The placeholder result of a program call not run yet, in the judge's evaluation of an assert test (``replay.py``):
truthy, it absorbs every operation, so that one pass of the test finds the calls after it; a pass that met one
gives no verdict.

Stdlib only and no trl_ext import: loaded like ``plain_data.py`` (see ``replay.py``).
"""

from __future__ import annotations

import collections
from typing import Any


class _Pending:
    """The placeholder result of a call not run yet: truthy, absorbs every operation, never a verdict."""

    def __bool__(self) -> bool:
        return True

    def _same(self, *args: Any, **kwargs: Any) -> _Pending:
        return self

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _same
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _same
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = __round__ = __call__ = _same
    __getitem__ = __getattr__ = _same
    __hash__ = object.__hash__

    def __contains__(self, *item: Any) -> bool:
        return True

    __setitem__ = __contains__

    def __iter__(self):
        return iter(())

    def __index__(self) -> int:
        return 0

    __int__ = __len__ = __index__

    def __float__(self) -> float:
        return 0.0

    def __repr__(self, *spec: Any) -> str:
        return "<pending>"

    __format__ = __repr__


_CONTAINERS = (list, tuple, set, frozenset, dict, collections.deque)
_ATOMS = frozenset({int, float, str, bool, type(None), bytes})


def _contains_pending(value: Any) -> bool:
    """Whether ``value`` holds a placeholder, anywhere in its containers (each visited once: aliases, cycles)."""
    todo, seen = [value], set()
    while todo:
        item = todo.pop()
        if type(item) in _ATOMS:  # the common arguments, at once (no ``__class__`` lookup by isinstance)
            continue
        if isinstance(item, _Pending):
            return True
        if isinstance(item, _CONTAINERS) and id(item) not in seen:
            seen.add(id(item))
            todo.extend(item.values() if isinstance(item, dict) else item)
            todo.extend(item.keys() if isinstance(item, dict) else ())
    return False
