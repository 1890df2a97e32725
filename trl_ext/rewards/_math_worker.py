"""Math verification worker process, started as ``python -c <this source>`` (see ``worker_argv``).

Run from source rather than ``-m`` so that it imports math-verify only, not the trl_ext package (torch).

Reads one JSON task per line on stdin, writes one JSON result per line on a private copy of stdout (fd 1
itself is pointed at stderr so library prints cannot corrupt the protocol). Parsed gold answers are cached.
The parent enforces a hard deadline per task by killing this process; math-verify's own signal timeouts
(main thread only, which this is) usually fire first and keep the process alive.
"""

import contextlib
import json
import logging
import os
import sys
import threading
import time
from functools import lru_cache


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _configs():
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return {
        "latex": [LatexExtractionConfig()],
        "expr": [ExprExtractionConfig()],
        "boxed": [LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)],
        "anchored": [
            LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False),
            ExprExtractionConfig(try_extract_without_anchor=False),
        ],
    }


def _grade(task: dict, configs: dict, parse_gold, timeout: int) -> str:
    from math_verify import parse, verify

    gold = list(parse_gold(task["gold"], task["gold_kind"], timeout))
    if not gold:
        return "gold_error"
    answer = parse(task["answer"], configs[task["mode"]], fallback_mode="no_fallback", parsing_timeout=timeout)
    if not answer:
        return "wrong"
    return "correct" if verify(gold, answer, timeout_seconds=timeout) else "wrong"


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    logging.disable(logging.CRITICAL)
    from math_verify import parse

    configs = _configs()

    @lru_cache(maxsize=4096)
    def parse_gold(text: str, kind: str, timeout: int):
        return tuple(parse(text, configs[kind], fallback_mode="no_fallback", parsing_timeout=timeout))

    # warm the LaTeX parser up (its first use loads the grammar) so that deadlines measure verification only
    warm_up = {"gold": "$1$", "gold_kind": "latex", "answer": "\\boxed{1}", "mode": "boxed"}
    with contextlib.suppress(Exception):  # a broken install shows up on the first real task instead
        _grade(warm_up, configs, parse_gold, 5)
    out.write('{"ready": true}\n')
    for line in sys.stdin:
        task = json.loads(line)
        try:
            result = _grade(task, configs, parse_gold, int(task["timeout"]))
        except Exception:
            result = "wrong"
        out.write(json.dumps({"r": result}) + "\n")


if __name__ == "__main__":
    main()
