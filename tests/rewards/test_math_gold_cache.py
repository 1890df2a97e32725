"""The math worker caches a gold's parse only when it finished in time: a parse that ran out of time under load is
not what the gold is, and cached it would score every later row of that gold 0."""


def _grader():
    """The math worker's module and Grader, loaded in this process; the bare ``trl_ext`` packages the worker
    registers (it runs without the package's ``__init__``) are taken out of ``sys.modules`` again."""
    import importlib.util
    import sys
    from pathlib import Path

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


def test_a_gold_read_past_half_its_timeout_is_not_cached(monkeypatch):
    # a gold parse that timed out on a loaded machine reads the gold as a string: cached, it scored every later
    # row of that gold 0 (seen: gold \sin 30^\circ, then \frac{1}{2} scored 0 in 0.02 s)
    worker, grader = _grader()
    clock, calls = [0.0], []

    def parts(texts, timeout):
        calls.append(texts)
        clock[0] += timeout if texts == ("slow",) else 0.01  # the slow gold's parse uses up its timeout
        return [texts]

    monkeypatch.setattr(worker.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(grader, "_gold_parts", parts)
    for _ in range(2):
        assert grader.gold_parts(("slow",), 2) == [("slow",)]
        assert grader.gold_parts(("fast",), 2) == [("fast",)]
    assert calls == [("slow",), ("fast",), ("slow",)]
