"""Which landlock tests the two non-root re-runs of this folder run (``test_real_uid_suite.py``: a real unprivileged
uid; ``test_container_landlock.py``: uid 1000 in a container without user namespaces).

Every test selected here also runs in the main run, on landlock as root and on the other backends; a re-run exists
for the code paths that differ when the trainer is not root: the landlock launcher's non-root branch (a user
namespace of its own, or none and the trainer's own uid), the uid-wide RLIMIT_NPROC budget and its admission, memory
and scratch bounded without a run cgroup (memfds refused, descriptors and non-dumpable processes read by the
watcher), the fork server and the evaluation worker started without root, and the result channel guarded by a
non-dumpable harness against a program running under the trainer's uid. Every test that stays selected runs its
programs through those paths, and the confinement, memory, scratch, fork-server, forged-record, decoding and
evaluation-worker suites stay whole.

Left out are the differential suites of the judge's value semantics (what crosses between the program and the test,
and CPython's verdict on it): their programs start through the same launcher, harness and fork server as the kept
tests, and what they add on top, the harness's value encoding and the judge's decisions on the records, reads no
uid, so a re-run as another uid takes no path the main run and the kept tests do not already take.
"""

from __future__ import annotations

JUDGE_SEMANTICS = (
    # whole files: value crossing and CPython's verdicts
    "test_builtin_subclasses", "test_decimal_context", "test_documented_limits", "test_exact_text",
    "test_exception_crossing_identity", "test_exception_identity", "test_exception_objects",
    "test_exception_qualnames", "test_generator_close", "test_iterator_classes", "test_iterator_return_values",
    "test_judging_exactness", "test_later_changes", "test_library_identity", "test_live_objects",
    "test_module_namespaces", "test_nan_bits", "test_ordered_dicts", "test_program_iterators", "test_rich_values",
    "test_source_relations", "test_stale_values", "test_stdio_tolerance", "test_test_state",
    "test_updates_in_place", "test_weak_references",
    # test_test_environment's verdicts on what a test does around a call (its forgery and secret-seed tests stay)
    "test_the_judge_gives_plain_cpythons_verdicts_around_calls", "test_what_cannot_cross_is_refused_never_passed",
    "test_an_exit_raised_by_the_program_is_no_pass", "test_rounds_of_one_evaluation_replay_the_same_results",
    "test_the_rounds_of_one_test_share_one_time_budget",
)  # fmt: skip
# the PID-1 reaping tests need root to make a PID namespace: they run as root, in the main run only
NON_ROOT_SELECTION = (
    "landlock and not container and not orphans_come_to_the_trainer and not (" + " or ".join(JUDGE_SEMANTICS) + ")"
)
