"""``trl-ext sandbox-serve`` holds a bounded memory for its answers (docs/sandbox.md, class 10; red team round 12:
three requests of ~300 bytes printing 16 MiB of control bytes held 401 MiB while their clients did not read). Each
request holds its answer's worst case (``ANSWER_BYTES_PER_OUTPUT_BYTE`` times its output cap) from a budget of the
service's, taken before the run and given back once the answer is written; past it, 429 (400 for a request that
alone asks more than the whole budget). The answer's JSON is written a piece at a time, never held whole."""

from __future__ import annotations

import json
import random
import threading

from trl_ext.sandbox.serve_http import json_pieces
from trl_ext.sandbox.server import ANSWER_BYTES_PER_OUTPUT_BYTE

from .._backends import start_server, stop_server
from ._serve import post, serving

_CAP = 2 << 20
_LOUD = "import sys, time\ntime.sleep({sleep})\nsys.stdout.buffer.write(bytes([1]) * {size})\n"


def _request(sleep: float = 0.0, size: int = _CAP, cap: int = _CAP) -> dict:
    return {"code": _LOUD.format(sleep=sleep, size=size), "language": "python", "output_limit_bytes": cap}


def test_answers_held_at_once_stay_within_the_services_budget():
    with serving(
        workers=2, queue=4, max_answers_mb=48
    ) as url:  # one answer's worst case: 12 x (2 MiB + 1 MiB of stderr) ~ 38 MiB
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


def _peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def test_an_answer_takes_no_more_memory_than_it_holds_of_the_budget():
    """The worst output for an answer's size, on stdout and on stderr (red team round 13: stderr was not counted):
    bytes that are no UTF-8 (each a replacement character, six once escaped) and one character outside the BMP
    (four bytes a character for the whole text), twice in a row."""
    worst = "import sys\nfor out in (sys.stdout, sys.stderr):\n"
    worst += "    out.buffer.write(bytes([255]) * {size} + chr(0x1F600).encode())\n"
    request = {"code": worst.format(size=(1 << 20) - 8), "language": "python", "output_limit_bytes": _CAP}
    proc, url = start_server("--workers", "1")
    try:
        post(url, _request(size=10))  # the service's own first-use allocations
        before = _peak_kib(proc.pid)
        for _ in range(2):
            status, answer = post(url, request)
            assert status == 200 and len(answer["run_result"]["stdout"]) > _CAP // 4
        grown = (_peak_kib(proc.pid) - before) << 10
    finally:
        stop_server(proc)
    assert grown <= ANSWER_BYTES_PER_OUTPUT_BYTE * (_CAP + (1 << 20)), grown / _CAP  # stdout's cap and stderr's


def test_the_answers_pieces_are_json_dumps():
    rng = random.Random(12)

    def value(depth: int = 0):
        pick = rng.random()
        if depth > 3 or pick < 0.4:
            long = "x" * rng.randint(0, 3 << 16) + '\x01\u00e9\U0001f600\\"'
            return rng.choice([None, True, False, 1.5, -3, 10**30, "", "\ufffd" * 5, long])
        if pick < 0.7:
            return {f"k{k}\n\u00e9": value(depth + 1) for k in range(rng.randint(0, 4))}
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    for _ in range(400):
        sample = value()
        assert "".join(json_pieces(sample)) == json.dumps(sample)


def test_stderr_is_charged_as_stdout_is():
    """A request asking one byte of stdout still carries up to 1 MiB of stderr: its share counts both."""
    with serving(workers=1, queue=1, max_answers_mb=12) as url:  # 12 x (1 MiB of stderr + headroom) > 12 MiB
        status, answer = post(url, _request(size=1, cap=1))
    assert status == 400 and "output_limit_bytes" in answer["detail"]
