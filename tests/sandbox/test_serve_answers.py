"""``trl-ext sandbox-serve`` holds a bounded memory for its answers (docs/sandbox.md, class 10; red team round 12:
three requests of ~300 bytes printing 16 MiB of control bytes held 401 MiB while their clients did not read). Each
request holds its answer's worst case (``ANSWER_BYTES_PER_OUTPUT_BYTE`` times its output cap) from a budget of the
service's, taken before the run and given back once the answer is written; past it, 429 (400 for a request that
alone asks more than the whole budget)."""

from __future__ import annotations

import threading
import tracemalloc

from trl_ext.sandbox.server import ANSWER_BYTES_PER_OUTPUT_BYTE

from ._serve import post, serving

_CAP = 2 << 20
_LOUD = "import sys, time\ntime.sleep({sleep})\nsys.stdout.buffer.write(bytes([1]) * {size})\n"


def _request(sleep: float = 0.0, size: int = _CAP, cap: int = _CAP) -> dict:
    return {"code": _LOUD.format(sleep=sleep, size=size), "language": "python", "output_limit_bytes": cap}


def test_answers_held_at_once_stay_within_the_services_budget():
    with serving(workers=2, queue=4, max_answers_mb=48) as url:  # one 2 MiB answer's worst case: ~34 MiB
        codes: list = []
        threads = [threading.Thread(target=lambda: codes.append(post(url, _request(1.5))[0])) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(codes) == [200, 429]  # two workers free, but one answer's worst case left in the budget
        status, answer = post(url, _request())  # the budget came back with the first answer
        assert status == 200 and len(answer["run_result"]["stdout"]) == _CAP
        status, answer = post(url, _request(cap=4 << 20))
        assert status == 400 and "output_limit_bytes" in answer["detail"]


def test_an_answer_takes_no_more_memory_than_it_holds_of_the_budget():
    with serving(workers=1, queue=1) as url:
        post(url, _request(size=10))  # the service's own first-use allocations
        tracemalloc.start()
        try:
            status, answer = post(url, _request())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert status == 200 and answer["run_result"]["stdout"] == "\x01" * _CAP
    assert peak <= ANSWER_BYTES_PER_OUTPUT_BYTE * _CAP  # the test's own copy of the answer included
