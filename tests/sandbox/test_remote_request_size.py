"""Class 3 (red team R10J-7): a request that ``sandbox-serve`` would refuse for its size is the program's failure
("output_limit", 0), never ``infra_error`` (None). An assert test sends the program's values back by value in each
call, so a program that returns a large value makes its own request large: a 900 KB string passed to 20 calls
made an 18 MB request, the service refused it and the client reported ``infra_error``. The service names its limit
in ``/health``; the client refuses an over-limit request itself and treats a 413 alike."""

from __future__ import annotations

import json
import urllib.request

from trl_ext.rewards import CodeTests

from ._serve import serving

_LIMIT = 256 << 10
_TEST = {"kind": "assert", "code": "s = make()\nfor _ in range(8):\n    assert size(s) == len(s)\nassert s == 'x'"}
_SMALL = "```python\ndef make():\n    return 'x' * 10\ndef size(s):\n    return len(s)\n```"
_LARGE = "```python\ndef make():\n    return 'x' * 60000\ndef size(s):\n    return len(s)\n```"
_RIGHT = "```python\ndef make():\n    return 'x'\ndef size(s):\n    return len(s)\n```"


def test_an_oversized_request_fails_the_program_never_infra():
    with serving(workers=2, max_request_bytes=_LIMIT) as url:
        with urllib.request.urlopen(url + "/health", timeout=10) as reply:
            assert json.loads(reply.read())["max_request_bytes"] == _LIMIT
        reward = CodeTests(backend="remote", sandbox_url=url, timeout_s=10.0)
        outcomes: list[dict] = []
        scores = reward([_LARGE, _SMALL, _RIGHT], tests=[_TEST] * 3, log_metric=lambda k, v: outcomes.append({k: v}))
    # 8 calls x 60 KB > 256 KiB: the large program's own request is over the limit; both wrong ones score 0
    assert scores == [0.0, 0.0, 1.0]
    logged = {k: v for row in outcomes for k, v in row.items()}
    assert logged.get("code_tests/output_limit", 0) > 0 and not logged.get("code_tests/infra_error")
