"""Sets in the program's iteration order, the judge's side: where no set of the judge's takes the order the
program's set had (another table history, str hashes of another seed), ``plain_data`` rebuilds it as one of these
(named ``set``/``frozenset``). ``_plain_kind`` is the plain type a value crosses as (such a set crosses as a set).

Stdlib only and no trl_ext import: loaded like ``plain_data.py`` (see there).
"""

from __future__ import annotations

from typing import Any


def _plain_kind(value: Any) -> type:
    return _PLAIN_KINDS.get(type(value), type(value))  # a program-order set crosses as a set


def _in_order(made: set | frozenset, base_iter: Any) -> list:
    """The elements of ``made`` in the program's order (elements the test added since: after, in the table's)."""
    kept = [item for item in getattr(made, "_order", ()) if item in made]
    known = set(kept)
    return kept + [item for item in base_iter(made) if item not in known]


class ProgramOrderSet(set):
    """A program's set whose order no table of the judge's takes (another history, str hashes of another seed):
    iteration, ``pop()`` and ``repr`` in the program's order, the rest a set's (``type()`` shows it, named set)."""

    __slots__ = ("_order", "_next")

    def __iter__(self):
        return iter(_in_order(self, set.__iter__))

    def pop(self) -> Any:  # from where the last pop() left off, as CPython's does: linear popping all
        order, start = getattr(self, "_order", ()), getattr(self, "_next", 0)
        self._next = next((i for i in range(start, len(order)) if order[i] in self), len(order))
        item = order[self._next] if self._next < len(order) else next(set.__iter__(self), self)
        if item is self:
            raise KeyError("pop from an empty set")
        self.remove(item)
        return item

    def __repr__(self) -> str:
        return "{" + ", ".join(map(repr, self)) + "}" if self else "set()"


class ProgramOrderFrozenset(frozenset):
    """The frozenset counterpart of ``ProgramOrderSet`` (named ``frozenset``)."""

    __slots__ = ("_order",)

    def __iter__(self):
        return iter(_in_order(self, frozenset.__iter__))

    def __repr__(self) -> str:
        return "frozenset({" + ", ".join(map(repr, self)) + "})" if self else "frozenset()"


_PLAIN_KINDS = {ProgramOrderSet: set, ProgramOrderFrozenset: frozenset}
for _kind, _base in _PLAIN_KINDS.items():
    _kind.__name__, _kind.__qualname__, _kind.__module__ = _base.__name__, _base.__name__, "builtins"
