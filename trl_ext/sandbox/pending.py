"""The placeholder result of a program call not run yet, in the judge's evaluation of an assert test (``replay.py``):
truthy, it absorbs every operation, so that one pass of the test finds the calls after it; a pass that met one
gives no verdict. Where a pass makes one into a builtin value, the calls it may have steered wait for the result
(``settled``).

Stdlib only and no trl_ext import: loaded like ``plain_data.py`` (see ``replay.py``).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any


class _Conversions:
    """What this process's pass made of placeholders: whether it turned one into a builtin value, and which of the
    made-up values it gives (``variant``: 0 or 1; ``settled``)."""

    converted = False
    variant = 0


CONVERSIONS = _Conversions()  # an evaluation worker evaluates one test at a time


def _made_up(value: Any) -> Any:
    """A placeholder's conversion (``len``, ``int``, ``float``, ``str``, iteration): ``value`` of the pass's
    variant, noted, since calls built from it may differ once the result is known."""
    CONVERSIONS.converted = True
    return value[CONVERSIONS.variant]


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
        return iter(_made_up(((), (self,))))

    def __index__(self) -> int:
        return _made_up((0, 1))

    __int__ = __len__ = __index__

    def __float__(self) -> float:
        return _made_up((0.0, 1.0))

    def __repr__(self, *spec: Any) -> str:
        return _made_up(("<pending>", "<pending result>"))

    __format__ = __repr__


class _Guessed(_Pending):
    """A result not known yet (the call at ``position`` of the pass). A pass that iterates it sees no item and goes
    on guessing; if the program returns an iterator there, its items come before the calls guessed after it, so the
    run ends after this call (halt "live"): no run shows the program a call that a later run would place after new
    calls (``records.RunHistory``)."""

    def __init__(self, halts: dict, position: int) -> None:
        self._halts, self._position = halts, position

    def __iter__(self):
        self._halts.setdefault(self._position, "live")
        return _Pending.__iter__(self)


def settled(one_pass: Callable[[dict], dict], task: dict) -> dict:
    """``one_pass(task)``'s answer, without the calls that its made-up values of placeholders may have steered (red
    team round 13, R13J-5). A placeholder turned into a builtin value (``len``, ``int``, ``float``, ``str``,
    iteration) gives a made-up one (0, nothing to iterate...), and a later call built from it (``g(len(f()))``, or
    a loop over a result, then a call) would be shown to the program, then refused by the binding rules when the
    next run makes the real call instead. Where the pass made such a value, the test is passed again with others
    (1, one placeholder to iterate...): the calls from the first that differs on are left to a later run (the run
    ends before them), and where none differs the run holds them all. The first call with no result always stays,
    so each run moves on."""
    CONVERSIONS.converted, CONVERSIONS.variant = False, 0
    answer = one_pass(task)
    if answer.get("verdict") != "incomplete" or not CONVERSIONS.converted:
        return answer
    CONVERSIONS.converted, CONVERSIONS.variant = False, 1
    try:
        other = one_pass(task)
    finally:
        CONVERSIONS.variant = 0
    calls, others = answer["calls"], other.get("calls", [])
    cut = next((k for k, call in enumerate(calls) if k >= len(others) or others[k] != call), len(calls))
    cut = max(cut, answer.get("frontier", 0) + 1)
    if cut >= len(calls):
        return answer
    halts = [halt for halt in answer.get("halts", []) if halt[0] < cut]
    return {**answer, "calls": calls[:cut], "halts": halts}


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
