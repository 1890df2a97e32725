"""The math worker caches a gold's parse only when it finished in time: a parse that ran out of time under load is
not what the gold is, and cached it would score every later row of that gold 0."""

from tests.rewards.math_worker_loader import load_worker


def test_a_gold_read_past_half_its_timeout_is_not_cached(monkeypatch):
    # a gold parse that timed out on a loaded machine reads the gold as a string: cached, it scored every later
    # row of that gold 0 (seen: gold \sin 30^\circ, then \frac{1}{2} scored 0 in 0.02 s)
    worker, grader = load_worker()
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
