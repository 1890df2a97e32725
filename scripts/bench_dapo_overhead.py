"""Per-step time of DAPOTrainer (dynamic sampling off) against stock trl.GRPOTrainer with the same settings.

Both trainers get DAPO's settings (clip-higher 0.28, token-level loss, truncated completions masked, β = 0, soft
overlong punishment: TRL's ``get_soft_overlong_punishment`` for stock, trl_ext's built-in one for DAPOTrainer), the
same tiny offline model, data and seed (so the same completions). Runs alternate stock / trl_ext; each run reports
the median of its per-step wall and CPU times (the first steps are warm-up and dropped), and the script prints the
ratio of the medians over runs for both clocks. On a shared, loaded machine the CPU-time ratio is the reliable one.
Target: ≤ 1.03.

    OMP_NUM_THREADS=1 python scripts/bench_dapo_overhead.py [--runs 5] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402


class StepTimer(TrainerCallback):
    """Wall time and CPU time of this process per optimizer step (CPU time is robust to a shared, loaded machine)."""

    def __init__(self):
        self.wall, self.cpu, self._start = [], [], None

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs):
        self.wall.append(time.perf_counter() - self._start[0])
        self.cpu.append(time.process_time() - self._start[1])


def task_reward(completions, **kwargs) -> list[float]:
    return [float(len(c) % 3) for c in completions]  # varies within groups, cheap


def settings(output_dir: str, args: argparse.Namespace, device: str) -> dict:
    return dict(
        output_dir=output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        epsilon_high=0.28,
        loss_type="dapo",
        mask_truncated_completions=True,
        beta=0.0,
        use_cpu=device == "cpu",
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=10**6,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )


def run(kind: str, model_path: str, dataset: Dataset, args: argparse.Namespace, device: str) -> tuple[float, float]:
    import trl
    from trl.rewards import get_soft_overlong_punishment

    import trl_ext

    cache = max(args.max_completion_length // 5, 1)
    with tempfile.TemporaryDirectory() as output_dir:
        if kind == "stock":
            config = trl.GRPOConfig(**settings(output_dir, args, device))
            punishment = get_soft_overlong_punishment(args.max_completion_length, cache)
            trainer = trl.GRPOTrainer(
                model=model_path, reward_funcs=[task_reward, punishment], args=config, train_dataset=dataset
            )
        else:
            config = trl_ext.DAPOConfig(**settings(output_dir, args, device), dynamic_sampling=False)
            trainer = trl_ext.DAPOTrainer(
                model=model_path, reward_funcs=[task_reward], args=config, train_dataset=dataset
            )
        timer = StepTimer()
        trainer.add_callback(timer)
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    return statistics.median(timer.wall[args.warmup :]), statistics.median(timer.cpu[args.warmup :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--num_generations", type=int, default=4)
    parser.add_argument("--max_completion_length", type=int, default=32)
    parser.add_argument("--hidden_size", type=int, default=64, help="tiny model width (64 is the test model)")
    args = parser.parse_args()

    from trl_ext.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory() as root:
        tokenizer = build_tiny_tokenizer()
        model = build_tiny_causal_lm(tokenizer, hidden_size=args.hidden_size, intermediate_size=2 * args.hidden_size)
        model.save_pretrained(root)
        tokenizer.save_pretrained(root)
        dataset = Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(64)]})
        times = {"stock": [], "trl_ext": []}
        for r in range(args.runs):
            for kind in ("stock", "trl_ext") if r % 2 == 0 else ("trl_ext", "stock"):
                times[kind].append(run(kind, root, dataset, args, device))
    print(f"device: {device}; runs: {args.runs} × {args.steps} steps (first {args.warmup} dropped)")
    for kind, values in times.items():
        walls, cpus = (", ".join(f"{1e3 * v[i]:.1f}" for v in values) for i in (0, 1))
        print(f"{kind:>8} per-step median of each run, wall ms: {walls}; cpu ms: {cpus}")
    for i, clock in enumerate(("wall", "cpu")):
        stock = statistics.median(v[i] for v in times["stock"])
        ours = statistics.median(v[i] for v in times["trl_ext"])
        print(f"per-step {clock} time ratio DAPOTrainer(dynamic_sampling=False) / trl.GRPOTrainer: {ours / stock:.3f}")


if __name__ == "__main__":
    main()
