"""Record and replay of assert tests (trl_ext.sandbox.replay) and the plain-data boundary, end to end."""

import collections
import json
import math
import random
from collections import Counter

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import Limits, judge, parse_tests, run_tests, test_specs
from trl_ext.sandbox.assert_plan import program_names
from trl_ext.sandbox.judge import harness_runtime
from trl_ext.sandbox.live import LiveObjects
from trl_ext.sandbox.plain_data import _plain_kind
from trl_ext.sandbox.replay import decode, encode, encode_call, evaluate

FAST = Limits(timeout_s=3.0)


def _harness_codec() -> dict:
    """The harness's own value functions (``_harness_values.py``, as the judge sends them), run in this process."""
    namespace = {"__name__": "_harness_runtime"}
    exec(compile(harness_runtime()["source"], "_harness_runtime.py", "exec"), namespace)
    return namespace


def _loaded(harness: dict, namespace: dict) -> dict:
    """``namespace`` as the program's module, with what the harness notes once the module ran (``_calls_child``:
    each call is then checked against it, red team R9b-3)."""
    harness["_LOADED"][:] = [harness["_module_state"](namespace)]
    return namespace


def _evaluate_with(test, fn, entry_point=None, prefix=None, rounds=5):
    """Evaluate ``test`` in this process, answering every call the stand-ins ask for with ``fn`` (a stand-in
    sandbox that runs each round's calls with the harness's own functions, fresh for each round); returns the final
    answer and the number of rounds it took."""
    names, modules = program_names(test, prefix, entry_point)
    task = {"test": test, "prefix": prefix, "entry_point": entry_point, "names": names, "modules": modules}
    task.update(calls=[], results=[], seed=7)
    for round_ in range(rounds):
        answer = evaluate(task)
        if answer["verdict"] != "incomplete":
            return answer, round_
        task.update(calls=answer["calls"], results=[])  # the whole sequence, run again in order
        harness, functions = _harness_codec(), {}
        for name, args, kwargs, sync in answer["calls"]:
            record = harness["_live_call"](name, args, kwargs, sync, _loaded(harness, {name: fn}), functions)
            task["results"].append(json.loads(record))
    return answer, rounds


def test_plain_data_round_trips_with_exact_types():
    value = [None, True, 1, -(10**5000), 1.5, float("inf"), 2j, "s", b"\x00", (1, (2,)), {3}, frozenset({4})]
    value.append({(1, 2): [1.0], "k": {}})
    back = decode(json.loads(json.dumps(encode(value))))
    assert back == value and [type(v) for v in back] == [type(v) for v in value]
    assert math.isnan(decode(encode(float("nan"))))
    for subclass_value in (type("I", (int,), {})(1), type("L", (list,), {})(), type("S", (str,), {})("x")):
        with pytest.raises(TypeError):
            encode(subclass_value)
    for malformed in ({"t": 1}, {"x": []}, {"d": [[1]]}, {"s": [[1]]}, {"c": [1, 2]}, {"a": 1, "b": 2}):
        with pytest.raises(ValueError):
            decode(malformed)


def _random_graph(rng: random.Random) -> list:
    """Arguments whose lists, dicts and sets share sub-objects at random (aliases, rows, cycles, tuple-held)."""
    pool: list = []

    def value(depth: int):
        if pool and rng.random() < 0.3:
            return rng.choice(pool)  # an alias of an object made before (maybe one still being filled: a cycle)
        kind = rng.choice(["int", "list", "dict", "set", "tuple", "deque", "bytes"] if depth < 4 else ["int"])
        if kind == "int":
            return rng.randint(-3, 3)
        if kind in ("set", "bytes"):
            made = {rng.randint(0, 9) for _ in range(rng.randint(0, 3))}
            made = bytearray(made) if kind == "bytes" else made
        elif kind == "tuple":
            return tuple(value(depth + 1) for _ in range(rng.randint(0, 3)))
        else:
            made = [] if kind == "list" else collections.deque() if kind == "deque" else {}
        pool.append(made)
        for k in range(rng.randint(0, 3)) if kind not in ("set", "bytes") else ():
            item = value(depth + 1)
            made.append(item) if kind != "dict" else made.__setitem__(f"k{k}", item)
        return made

    return [value(0) for _ in range(rng.randint(1, 3))]


def _same_shape(one, other, pairs: dict) -> bool:
    """Whether two object graphs are the same graph: equal leaves, and the same sharing of lists, dicts and sets
    (an object of one always meets the same object of the other, both ways)."""
    if _plain_kind(one) is not _plain_kind(other):  # a set in the program's order is a set
        return False
    if _plain_kind(one) in (list, dict, set, collections.deque, bytearray):
        if id(one) in pairs:
            return pairs[id(one)] is other
        if id(other) in {id(v) for v in pairs.values()}:
            return False
        pairs[id(one)] = other
    if type(one) in (list, tuple, collections.deque):
        return len(one) == len(other) and all(_same_shape(a, b, pairs) for a, b in zip(one, other))
    if type(one) is dict:
        return one.keys() == other.keys() and all(_same_shape(one[k], other[k], pairs) for k in one)
    return one == other


def _reachable(roots: list) -> list:
    """The lists, dicts, sets, deques and bytearrays reachable from ``roots``, each once, in a stable order."""
    found, todo, seen = [], list(roots), set()
    while todo:
        obj = todo.pop()
        if isinstance(obj, (list, tuple, dict, set, collections.deque, bytearray)) and id(obj) not in seen:
            seen.add(id(obj))
            found += [obj] if type(obj) is not tuple else []
            todo += [] if type(obj) is bytearray else list(obj.values() if type(obj) is dict else obj)
    return found


def _program_changing(rng: random.Random, sent: list):
    """A stand-in program that keeps what it is given and what it returns, changes any of it (this call's objects
    or an earlier call's, through whatever path it finds) and then returns (or raises with) new containers holding
    some of them; what it sent goes to ``sent``."""
    kept: list = []

    def program(*args, **kwargs):
        kept.append([args, kwargs])
        mutable = _reachable(kept)
        for obj in rng.sample(mutable, min(len(mutable), 3)):
            if type(obj) in (list, collections.deque):
                obj.append(rng.choice(mutable)) if rng.random() < 0.5 else obj.reverse()
            elif type(obj) is bytearray:
                obj.append(rng.randint(0, 255))
            elif type(obj) is dict:
                obj[f"n{rng.randint(0, 2)}"] = rng.choice([rng.choice(mutable), (1, rng.choice(mutable))])
            else:
                obj.add(rng.randint(10, 12))
        fresh = rng.choice(
            [collections.deque([rng.choice(mutable)] if mutable else []), bytearray(b"n"), Counter(a=1)]
        )
        sent.append([args[0], [rng.choice(mutable), {"new": [mutable[-1]]}, fresh]] if mutable else [[]])
        if rng.random() < 0.3:  # dropped after a change: the change still reaches the test
            kept.pop(rng.randrange(len(kept)))
        if rng.random() < 0.3:
            raise ValueError(*sent[-1])
        return sent[-1]

    return program


def _test_changing(holds: list, rng: random.Random) -> None:
    """The test's own changes between calls, to any object it holds or reaches (sent with the next call)."""
    objects = _reachable(holds)
    for obj in rng.sample(objects, min(len(objects), 2)):
        if type(obj) is list:
            obj.insert(0, rng.choice([7, (8, obj), rng.choice(objects) if type(rng.choice(objects)) is list else 9]))
        elif type(obj) is dict:
            obj["t"] = [rng.randint(0, 9)]
        elif type(obj) is set:
            obj.discard(10) if rng.random() < 0.5 else obj.add(13)
        elif type(obj) in (bytearray, collections.deque):
            obj.clear()


def test_the_runs_objects_stay_one_graph_on_both_sides_across_calls():
    """The root of aliasing and live state: the judge's ``LiveObjects`` and the harness's numbered objects form the
    same graph (one object per shared object, cycles included) for a whole run of calls. What the test changes
    reaches the program before its next call, what the program changes (in any object it keeps, through any
    alias) reaches the test after it, and a value names the same objects."""
    for seed in range(30):
        harness, rng, live, functions, sent = _harness_codec(), random.Random(seed), LiveObjects(), {}, []
        program, holds = _program_changing(rng, sent), []
        module = _loaded(harness, {"f": program})
        for _ in range(10):
            args = _random_graph(rng)
            holds.append(args)
            sync = live.test_changes()
            encoded_args, encoded_kwargs, _ = encode_call(args, {"kw": args[0]}, live.graph)
            frame = json.loads(json.dumps(["f", encoded_args, encoded_kwargs, sync]))
            record = json.loads(harness["_live_call"](*frame, module, functions))
            decoded = live.apply(record, sync, {"nans": {}, "live": None})
            assert record["ok"] or "exc" in record, record  # never "unencodable": both sides agree on every number
            returned = [decoded, sent[-1]] if record["ok"] else [decoded[0], sent[-1][0]]
            assert _same_shape([live.graph[1], returned[0]], [harness["_LIVE"], returned[1]], {}), record
            holds.append(decoded)
            _test_changing(holds, rng)
            if rng.random() < 0.3:  # dropped after a change: the change still reaches the program
                holds.pop(rng.randrange(len(holds)))


def test_loops_random_inputs_and_arithmetic_take_one_round():
    test = (
        "import random\ndef check(candidate):\n    for _ in range(50):\n        a, b = random.random(), random.randint(0, 9)\n"
        "        assert abs(candidate(a, b) - (a + b)) < 1e-9\n    assert candidate(1, 2) == 3\n"
    )
    answer, rounds = _evaluate_with(test, lambda a, b: a + b, entry_point="add")
    assert (answer["verdict"], rounds) == ("passed", 1)
    assert _evaluate_with(test, lambda a, b: a - b, entry_point="add")[0]["verdict"] == "failed"


def test_arguments_that_depend_on_results_take_more_rounds():
    test = "assert inc(inc(inc(0))) == 3\n"
    answer, rounds = _evaluate_with(test, lambda x: x + 1)
    assert (answer["verdict"], rounds) == ("passed", 3)


def test_exceptions_mutations_and_modules_are_replayed():
    test = (
        "try:\n    parse('x')\n    raise AssertionError('no error')\nexcept ValueError:\n    pass\n"
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]\nassert math.isclose(parse('2.5'), 2.5)\n"
    )

    def program(*args):
        if isinstance(args[0], list):
            args[0].sort()
            return None
        return float(args[0])

    answer, _ = _evaluate_with(test, program)
    assert answer["verdict"] == "passed", answer
    assert program_names(test, None, None) == (["parse", "sort_in_place"], ["math"])


def test_arguments_that_are_not_plain_data_are_unsupported():
    answer, _ = _evaluate_with("assert apply(lambda x: x + 1, 1) == 2\n", lambda f, x: f(x))
    assert answer["verdict"] == "unsupported" and "not plain data" in answer["detail"]


def test_run_tests_outcomes():
    spec = {"kind": "assert", "code": "assert apply(lambda x: x, 1) == 1\n"}
    unsupported = run_tests("def apply(f, x):\n    return f(x)\n", spec, limits=FAST)
    assert unsupported.passed == 0 and "unsupported_test" in unsupported.statuses
    nothing = run_tests("x = 1\n", {"kind": "assert", "code": "assert True\n"}, limits=FAST)
    assert nothing.passed == 0 and "unsupported_test" in nothing.statuses
    # a result that makes the (trusted) test loop forever: the evaluation worker is killed at its deadline
    loop = {"kind": "assert", "code": "x = f()\nwhile isinstance(x, int):\n    pass\n"}
    hung = run_tests("def f():\n    return 1\n", loop, limits=Limits(timeout_s=1.0))
    assert hung.passed == 0 and hung.statuses[-1] == "timeout"
    # a test calling the program without end: every call counts (none is merged), so it is cut at 20,000
    endless = {"kind": "assert", "code": "n = 0\nwhile n != f():\n    pass\n"}
    cut = run_tests("def f():\n    return 1\n", endless, limits=Limits(timeout_s=10.0))  # the cap comes first
    assert cut.passed == 0 and cut.statuses == ["unsupported_test"] and "20000 calls" in cut.detail
    inplace = {
        "kind": "assert",
        "code": "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]\ntry:\n    parse('x')\nexcept ValueError:\n"
        "    pass\nelse:\n    raise AssertionError\n",
    }
    program = "def sort_in_place(xs):\n    xs.sort()\ndef parse(s):\n    return float(s)\n"
    assert run_tests(program, inplace, limits=FAST).all_passed
    assert not run_tests(program.replace("xs.sort()", "sorted(xs)"), inplace, limits=FAST).all_passed
    inc = "def inc(x):\n    return x + 1\n"
    four_levels = run_tests(inc, {"kind": "assert", "code": "assert inc(inc(inc(inc(0)))) == 4\n"}, limits=FAST)
    assert four_levels.all_passed and four_levels.statuses == ["ok"] * 4  # one sandbox run per level
    tuples = {"kind": "assert", "code": "assert pair(1) == (1, 1)\nassert pair(2) != [2, 2]\n"}
    assert run_tests("def pair(x):\n    return (x, x)\n", tuples, limits=FAST).all_passed
    assert not run_tests("def pair(x):\n    return [x, x]\n", tuples, limits=FAST).all_passed


def test_malformed_specs_name_the_row_and_field_before_any_run(monkeypatch):
    reward = CodeTests(timeout_s=3.0)
    ran = []
    monkeypatch.setattr("trl_ext.rewards.code.run_tests", lambda *args, **kwargs: ran.append(args))
    good = {"kind": "assert", "code": "assert f(1) == 1\n"}
    bad = [
        ({"kind": "unit"}, "kind"),
        ({"kind": "call", "cases": [{"args": [], "expected": 1}]}, "fn_name"),
        ({"kind": "assert", "code": "assert f(1) == 1", "prefix": "def f(x:\n"}, "prefix"),
        ({"kind": "assert", "code": "assert f(1) ==\n"}, "code"),
        ({"kind": "assert", "code": "assert f(1) == 1", "entry_point": "f"}, "check"),
        ({"kind": "call", "fn_name": "not a name", "cases": [{"args": [], "expected": 1}]}, "fn_name"),
    ]
    for spec, field in bad:
        with pytest.raises(ValueError, match=rf"code_tests, row 1: .*{field}"):
            reward(["```python\ndef f(x):\n    return x\n```"] * 2, tests=[good, spec])
    assert ran == []  # not even the well-formed row 0 ran
    assert parse_tests({**good, "prefix": "def f(x):\n    '''doc'''\n"})["prefix"]


def test_the_prefix_gives_the_tests_helpers_and_its_last_function_is_the_programs():
    prefix = "def helper(x):\n    return x + 1\n\n\ndef f(x):\n    '''Twice helper(x).'''\n"
    assert program_names("assert f(1) == 2 * helper(1)\n", prefix, None) == (["f"], [])
    spec = {"kind": "assert", "code": "assert f(1) == 2 * helper(1)\n", "prefix": prefix}
    honest = prefix + "    return 2 * helper(x)\n"
    cheat = honest + "\n\ndef helper(x):\n    return 0\n\n\ndef f(x):\n    return 0\n"  # rigs the test's helper
    assert run_tests(honest, spec, limits=FAST).all_passed
    assert not run_tests(cheat, spec, limits=FAST).all_passed


def test_sandbox_runs_are_bounded_by_progress_and_a_cap(monkeypatch):
    """Each run must move the first call with no result further; at most ``_MAX_ROUNDS`` runs (4 here)."""
    monkeypatch.setattr(judge, "_MAX_ROUNDS", 4)
    inc = "def inc(x):\n    return x + 1\n"
    five = run_tests(inc, {"kind": "assert", "code": "assert inc(inc(inc(inc(inc(0))))) == 5\n"}, limits=FAST)
    assert five.passed == 0 and five.statuses[-1] == "unsupported_test"
    # a program whose results change the test's calls on every run never moves the frontier: stopped, not looped
    flip = "import os\ndef f(x):\n    return os.urandom(8).hex()\n"  # `random` is seeded alike in every run
    chase = {"kind": "assert", "code": "x = f(0)\ny = f(x)\nassert f(y) == -1\n"}
    chased = run_tests(flip, chase, limits=FAST)
    assert chased.passed == 0 and chased.statuses[-1] == "unsupported_test" and len(chased.statuses) <= 4
    assert "differ between sandbox runs" in chased.detail  # a cycle, or a changed answer (RunHistory)


def test_the_judge_parses_python_one_thread_at_a_time(monkeypatch):
    # the code reward grades programs in threads, and CPython 3.11's ast.parse is not thread-safe: a collection that
    # switched threads while it built a tree raised SystemError ("AST constructor recursion depth mismatch") out of
    # the reward (seen in a full run); every parse of the judge's own holds one lock
    from trl_ext.sandbox import assert_plan
    from trl_ext.sandbox.assert_plan import shadowed_names

    held, parse = [], assert_plan.ast.parse

    def watched(source, *args, **kwargs):
        held.append(assert_plan._AST_LOCK.locked())
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(assert_plan.ast, "parse", watched)
    program_names("assert f(1) == 2\n", "def f(x):\n    pass\n", None)
    shadowed_names("def f(x):\n    return g(x)\n", {"g": None})
    test_specs._syntax_error.__wrapped__("x = 1\n")
    test_specs._defines_check.__wrapped__("def check(candidate):\n    pass\n")
    assert held == [True] * 5
