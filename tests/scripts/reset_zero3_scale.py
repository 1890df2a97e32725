"""Two-process ZeRO-3 reference resets that scale (launched by tests/resets/test_zero3.py with accelerate).

``python reset_zero3_scale.py POLICY OUTPUT_DIR [CHECKPOINT]``: trains a tiny GRPO run to step 3 with a reset at step 2
and a checkpoint right after it (or resumes from CHECKPOINT). DeepSpeed's parameter gathers are counted while the
reset copies the policy into the reference and while the reference is saved. Each rank reports the largest number
of parameters gathered at once in those windows, a digest of the final policy and reference, and the logged KL.
"""

import contextlib
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from deepspeed.runtime.zero import partition_parameters  # noqa: E402

from tests._launch import write_report_and_exit  # noqa: E402
from tests._reset_trainers import ResetGRPOTrainer, length_reward, prompts, tiny_config  # noqa: E402
from trl_ext.resets import mixin as reference_resets  # noqa: E402  (the module whose names the reset mixin calls)
from trl_ext.resets.weights import _is_gathered, gathered_parameters, is_partitioned  # noqa: E402


class GatherCounter:
    """Records, inside ``watching(window)``, how many not-yet-gathered ZeRO-3 parameters each gather fetches."""

    def __init__(self):
        self.window, self.largest, self.calls = None, {}, {}
        original = partition_parameters.Init._all_gather

        def counting(init, param_list, async_op=False, hierarchy=None):
            if self.window is not None:
                fetched = sum(p.ds_status == partition_parameters.ZeroParamStatus.NOT_AVAILABLE for p in param_list)
                self.largest[self.window] = max(self.largest.get(self.window, 0), fetched)
                self.calls[self.window] = self.calls.get(self.window, 0) + 1
            return original(init, param_list, async_op=async_op, hierarchy=hierarchy)

        partition_parameters.Init._all_gather = counting

    @contextlib.contextmanager
    def watching(self, window):
        self.window = window
        self.largest.setdefault(window, 0)
        try:
            yield
        finally:
            self.window = None

    def wrap(self, module, name, window):
        function = getattr(module, name)

        def watched(*args, **kwargs):
            with self.watching(window):
                return function(*args, **kwargs)

        setattr(module, name, watched)


def digest(params):
    """sha256 over every parameter's full value, gathered one at a time (test bookkeeping, after training)."""
    h = hashlib.sha256()
    for param in params:
        with gathered_parameters([param], modifier_rank=None):
            h.update(param.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(policy_path, output_dir, checkpoint=None):
    counter = GatherCounter()
    counter.wrap(reference_resets, "copy_policy_to_reference", "reset")
    counter.wrap(reference_resets, "save_reference", "save")
    args = tiny_config(output_dir, ref_reset_steps=2, max_steps=3, save_strategy="steps", save_steps=2,
                       use_cpu=False, ddp_backend="gloo")  # fmt: skip
    trainer = ResetGRPOTrainer(model=policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts())
    policy, reference = trainer._reference_models()
    trainer.train(resume_from_checkpoint=checkpoint)
    with counter.watching("instrument_check"):  # the counter sees a gather of one parameter
        sharded = next(p for p in reference.parameters() if is_partitioned(p) and not _is_gathered(p))
        with gathered_parameters([sharded], modifier_rank=None):
            pass
    report = {
        "largest_gather": counter.largest,
        "gather_calls": counter.calls,
        "resets": trainer.reset_bookkeeping.reset_steps,
        "partitioned": all(is_partitioned(p) for p in [*policy.parameters(), *reference.parameters()]),
        "persistent": sum(_is_gathered(p) for p in reference.parameters()),
        "policy": digest(list(policy.parameters())),
        "reference": digest(list(reference.parameters())),
        "kl": [log["kl"] for log in trainer.state.log_history if "kl" in log],
    }
    write_report_and_exit(trainer, output_dir, report)


if __name__ == "__main__":
    main(*sys.argv[1:4])
