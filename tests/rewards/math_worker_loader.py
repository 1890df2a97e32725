"""The math worker's module and a Grader of its own, loaded in the test's process (the worker runs without the
package's ``__init__`` and registers bare ``trl_ext`` packages, which are taken out of ``sys.modules`` again)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def load_worker():
    """``(worker module, Grader)``; parsed golds are cached per Grader, so each call gives a fresh one."""
    import math_verify  # noqa: F401  (loaded before the snapshot: a second copy of sympy would parse nothing)

    import trl_ext.rewards as rewards

    folder = Path(rewards.__file__).parent
    saved = dict(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location("math_worker_under_test", folder / "_math_worker.py")
        worker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(worker)
        return worker, worker.Grader(str(folder / "_math_answers.py"))
    finally:
        for name in set(sys.modules) - set(saved):
            del sys.modules[name]
        sys.modules.update(saved)
