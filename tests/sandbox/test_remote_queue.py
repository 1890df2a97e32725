"""Classes 3 and 7 through the remote backend: programs that wait out their time limit at a busy ``sandbox-serve``
do not turn the right programs queued behind them into ``infra_error`` (red team round 12: a batch of 14 sleeping
wrong programs and 2 right ones on a service of 2 workers gave a right program None after 75 s; TRL drops such a
row). The remote backend keeps at most twice the service's workers in flight (its ``/health`` says how many) and
counts a request's deadline from when it is sent."""

from __future__ import annotations

import threading

from trl_ext.rewards import CodeTests
from trl_ext.sandbox.remote import RemoteBackend

from ._serve import serving

SLEEPER = "```python\nimport time\ntime.sleep(30)  # {}\n```"  # distinct: identical programs are graded once
RIGHT = "```python\nprint(int(input()) * 2)\n```"
SPEC = {"kind": "stdio", "cases": [{"input": "21\n", "output": "42"}]}


def test_slow_wrong_programs_never_make_a_right_one_infrastructure():
    with serving(workers=1, queue=16) as url:
        reward = CodeTests(backend=RemoteBackend(url, queue_s=0.5, retries=0), timeout_s=1.5, workers=8)
        completions = [SLEEPER.format(k) for k in range(5)] + [RIGHT]
        assert reward(completions, tests=[SPEC] * len(completions)) == [0.0] * 5 + [1.0]


def test_ranks_queueing_at_one_service_get_no_none_at_the_defaults():
    """Red team round 13: each rank of a job has its own remote backend; their requests queue at the service
    together, about one run per rank ahead of each. At the defaults no row becomes infrastructure. (The round's
    own case, 8 ranks with ``timeout_s`` 8 against the old 60 s default, takes minutes: its repro is outside the
    suite; this checks the shape at a size the suite affords.)"""
    with serving(workers=1, queue=16) as url:
        scores: list = []

        def rank(k: int) -> None:
            reward = CodeTests(backend=RemoteBackend(url, retries=0), timeout_s=1.0, workers=4)
            completions = [SLEEPER.format(f"{k}-{j}") for j in range(2)] + [RIGHT]
            scores.append(reward(completions, tests=[SPEC] * 3))

        threads = [threading.Thread(target=rank, args=(k,)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert sorted(scores) == [[0.0, 0.0, 1.0]] * 3


def test_a_test_of_many_cases_fits_the_services_longest_run():
    """Red team round 13 (R13J-3): a stdio or call test is one run for all its cases, whose time limit grows with
    them; past the service's ``--max-timeout`` it refused the request (400), and every program of such a row was
    None. The remote backend reads the service's longest run from ``/health`` and asks no more; each case keeps its
    own deadline there."""
    with serving(workers=1, max_timeout_s=3.0) as url:
        cases = [{"input": f"{k}\n", "output": str(2 * k)} for k in range(6)]  # 6 x (1 s + slack) > 3 s
        reward = CodeTests(backend=RemoteBackend(url, retries=0), timeout_s=1.0)
        right = "```python\nprint(int(input()) * 2)\n```"
        assert reward([right, SLEEPER.format("many")], tests=[{"kind": "stdio", "cases": cases}] * 2) == [1.0, 0.0]


def test_many_slow_cases_past_the_services_longest_run_are_judged_in_parts():
    """Red team round 14 (R14J-3): capped at the service's longest run, a test whose cases each fit ``timeout_s``
    but together pass it was killed part way: a right program scored 0 on the remote backend only. Such a test now
    runs in parts of whole cases, each within the service's longest run (stdio and call tests)."""
    with serving(workers=1, max_timeout_s=3.0) as url:
        reward = CodeTests(backend=RemoteBackend(url, retries=0), timeout_s=1.0)
        slow = "```python\nimport time\ntime.sleep(0.6)\nprint(int(input()) * 2)\n```"
        stdio = {"kind": "stdio", "cases": [{"input": f"{k}\n", "output": str(2 * k)} for k in range(6)]}
        wrong = "```python\nimport time\ntime.sleep(0.6)\nprint(int(input()) * 2 + (int(input() or 0) == 5))\n```"
        call = {"kind": "call", "fn_name": "f", "cases": [{"args": [k], "expected": 2 * k} for k in range(6)]}
        slow_call = "```python\nimport time\ndef f(x):\n    time.sleep(0.6)\n    return 2 * x\n```"
        assert reward([slow, wrong, slow_call], tests=[stdio, stdio, call]) == [1.0, 0.0, 1.0]
