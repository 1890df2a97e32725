"""Cost of dynamic sampling on the tiny model with a reward whose informative rate is set.

A fraction ``rate`` of the prompts is informative (its G scripted rewards differ), the rest are not (all equal).
For each rate the script trains the same tiny model, data and seed with:

    grpo          trl_ext.GRPOTrainer, no filtering (the cost floor: every generated row is trained)
    dapo          DAPOTrainer (dynamic sampling: score first, rounds sized to need)
    dapo+greso    DAPOTrainer with prompt_skipping="greso"
    dapo+margin1  (on request) DAPOTrainer with dynamic_sampling_round_margin=1: fewer rounds, more rows

and counts, independently of the trainer's metrics (a forward pre-hook and a wrapper around ``generate`` on the
model), the rows generated, the rows through a no-grad forward outside generation (old/reference log-probs) and
the rows through a forward with gradients (trained), plus per-step wall and CPU time (mean, warm-up dropped).
Two optimizer steps per generation batch (steps_per_generation=2), so TRL computes old log-probs.

    OMP_NUM_THREADS=1 python scripts/bench_dynamic_sampling.py [--rates 0.25 0.5 0.9] [--steps 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from bench_dapo_overhead import StepTimer  # noqa: E402  (scripts/ is on sys.path when run as a script)
from datasets import Dataset  # noqa: E402
from transformers import PrinterCallback  # noqa: E402

G = 4


class RowCounter:
    """Rows generated, rows through a no-grad forward outside ``generate``, rows through a forward with grad."""

    def __init__(self, model):
        self.generated = self.logprob = self.trained = 0
        self._in_generate = False
        generate = model.generate

        def counting_generate(*args, **kwargs):
            self.generated += kwargs["input_ids"].shape[0]
            self._in_generate = True
            try:
                return generate(*args, **kwargs)
            finally:
                self._in_generate = False

        model.generate = counting_generate
        model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs):
        rows = (kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]).shape[0]
        if torch.is_grad_enabled():
            self.trained += rows
        elif not self._in_generate:
            self.logprob += rows


def rate_dataset(rate: float, num_prompts: int, seed: int = 1234) -> Dataset:
    # A seed other than the trainer's: TRL's sampler draws torch.randperm with the training seed.
    generator = torch.Generator().manual_seed(seed)
    informative = set(torch.randperm(num_prompts, generator=generator)[: round(rate * num_prompts)].tolist())
    scores = [[1.0, 0.0, 1.0, 0.0] if i in informative else [1.0] * G for i in range(num_prompts)]
    return Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(num_prompts)], "scores": scores})


def scripted_reward(completions, scores, **kwargs) -> list[float]:
    return [row[i % G] for i, row in enumerate(scores)]


def run(variant: str, model_path: str, rate: float, args: argparse.Namespace) -> dict:
    import trl_ext

    settings = dict(
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        steps_per_generation=2,
        num_generations=G,
        max_completion_length=args.max_completion_length,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    if variant == "grpo":
        config_cls, trainer_cls = trl_ext.GRPOConfig, trl_ext.GRPOTrainer
    else:
        config_cls, trainer_cls = trl_ext.DAPOConfig, trl_ext.DAPOTrainer
        settings["soft_overlong_punishment"] = False
    if "greso" in variant:
        settings["prompt_skipping"] = "greso"
    if "margin1" in variant:
        settings["dynamic_sampling_round_margin"] = 1.0
    with tempfile.TemporaryDirectory() as output_dir:
        config = config_cls(output_dir=output_dir, **settings)
        trainer = trainer_cls(
            model=model_path,
            reward_funcs=scripted_reward,
            args=config,
            train_dataset=rate_dataset(rate, args.num_prompts),
        )
        counter = RowCounter(trainer.model)
        timer = StepTimer()
        trainer.add_callback(timer)
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    logs = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
    rounds = statistics.mean(log["dynamic_sampling/rounds"] for log in logs) if logs else 1.0
    return {
        "wall": statistics.mean(timer.wall[args.warmup :]),
        "cpu": statistics.mean(timer.cpu[args.warmup :]),
        "generated": counter.generated,
        "logprob": counter.logprob,
        "trained": counter.trained,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.25, 0.5, 0.9])
    parser.add_argument("--variants", nargs="+", default=["grpo", "dapo", "dapo+greso"])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--num_prompts", type=int, default=64)
    parser.add_argument("--max_completion_length", type=int, default=16)
    args = parser.parse_args()

    from trl_ext.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    with tempfile.TemporaryDirectory() as root:
        tokenizer = build_tiny_tokenizer()
        build_tiny_causal_lm(tokenizer).save_pretrained(root)
        tokenizer.save_pretrained(root)
        print(f"{args.steps} steps × {args.batch_size} rows, G={G}, 2 steps per generation batch; per-step means")
        print("rate  variant      wall ms  cpu ms  generated  logprob  trained  gen/trained  ×rate  rounds")
        for rate in args.rates:
            base = None
            for variant in args.variants:
                r = run(variant, root, rate, args)
                base = base or r
                ratio = r["generated"] / r["trained"]
                print(
                    f"{rate:<5} {variant:<12} {1e3 * r['wall']:7.0f} {1e3 * r['cpu']:7.0f} {r['generated']:10d} "
                    f"{r['logprob']:8d} {r['trained']:8d} {ratio:12.2f} {ratio * rate:6.2f} {r['rounds']:7.2f}"
                    f"   (time ×{r['wall'] / base['wall']:.2f} of {args.variants[0]})"
                )


if __name__ == "__main__":
    main()
