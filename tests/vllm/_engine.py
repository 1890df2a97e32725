"""Real vLLM engines in the tests: shared between trainers, spied on, and compared with the trainer's weights.

TRL's colocate mode builds its engine with ``vllm.LLM(...)`` inside ``trl.generation.vllm_generation``;
``shared_engines`` replaces that name with a factory that builds one engine per model (and engine settings) and
hands it to every later trainer. Each trainer then pushes its own weights before its first generation, so reuse
also checks the push: a test whose trainer did not sync would find the previous test's weights in the engine.
The engines are built with ``enforce_eager=True``: vLLM's torch.compile takes minutes on a CPU, and it changes how
the forward runs, not the weights, the sampling or TRL's weight push that these tests check.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter, defaultdict

import torch

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on CPU (vLLM's default is 4)

# vLLM fuses these projections; the trainer keeps them apart (concatenated along the output dimension, in order)
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
# arguments that do not change what an engine computes; a shared engine takes the largest
_SIZE_ONLY = ("seed", "max_num_seqs", "gpu_memory_utilization")


class SharedEngines:
    """Stands in for ``vllm.LLM`` where TRL builds its colocated engine: one eager engine per settings."""

    def __init__(self, eager: bool = True):
        self.engines: dict[tuple, object] = {}
        self.eager = eager

    def __call__(self, **kwargs):
        from vllm import LLM

        key = tuple(sorted((name, repr(value)) for name, value in kwargs.items() if name not in _SIZE_ONLY))
        if key not in self.engines:
            kwargs["max_num_seqs"] = max(kwargs.get("max_num_seqs") or 0, 64)
            self.engines[key] = LLM(**kwargs, enforce_eager=self.eager)
        return self.engines[key]


@contextlib.contextmanager
def shared_engines(eager: bool = True):
    import trl.generation.vllm_generation as vllm_generation

    factory = SharedEngines(eager)
    original = vllm_generation.LLM
    vllm_generation.LLM = factory
    try:
        yield factory
    finally:
        vllm_generation.LLM = original


def engine_model(llm) -> torch.nn.Module:
    """The engine's model, where TRL's colocate weight push loads weights into it."""
    return llm.llm_engine.model_executor.driver_worker.model_runner.model


def weight_mismatches(llm, model: torch.nn.Module) -> tuple[list[str], int]:
    """Compare every engine parameter with the trainer's, rounded to the engine's dtype (fused ones rebuilt from
    their parts). Returns (mismatching engine names, number of engine tensors compared); every trainer parameter
    must be part of the comparison."""
    trainer_params = dict(model.named_parameters())
    used, mismatches, compared = set(), [], 0
    for name, value in engine_model(llm).named_parameters():
        parts = [name]
        for fused, pieces in FUSED.items():
            if f".{fused}." in name:
                parts = [name.replace(f".{fused}.", f".{piece}.") for piece in pieces]
        missing = [part for part in parts if part not in trainer_params]
        if missing:
            raise AssertionError(f"engine weight {name} has no trainer counterpart {missing}")
        expected = torch.cat([trainer_params[part].detach().cpu() for part in parts]).to(value.dtype)
        value = value.detach().cpu()
        if name.endswith(("embed_tokens.weight", "lm_head.weight")):  # vLLM pads the vocabulary to a multiple of 64
            value = value[: expected.shape[0]]
        used.update(parts)
        compared += 1
        if expected.shape != value.shape or not torch.equal(expected, value):
            mismatches.append(name)
    unused = set(trainer_params) - used
    if unused:
        raise AssertionError(f"trainer weights the engine does not hold: {sorted(unused)}")
    return mismatches, compared


def engine_fingerprint(llm) -> torch.Tensor:
    """One float per engine tensor (its sum): enough to see that an update changed the engine's weights."""
    return torch.stack([p.detach().float().sum() for p in engine_model(llm).parameters()])


def strip_pad(ids, pad_id: int) -> tuple[int, ...]:
    ids = [int(token) for token in ids]
    while ids and ids[-1] == pad_id:
        ids.pop()
    return tuple(ids)


class EngineWatch:
    """Spies on a trainer's colocated engine: before each ``generate`` it compares the engine's weights with the
    trainer's; it records each generated token sequence, each weight push and each trained completion, by step."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.generation = trainer.vllm_generation
        self.llm = self.generation.llm
        self.pad_id = trainer.processing_class.pad_token_id
        self.generated: dict[int, Counter] = defaultdict(Counter)  # step -> engine outputs (token tuples)
        self.trained: dict[int, list] = defaultdict(list)  # step -> completions in the loss
        self.checks: list[dict] = []  # per generate call: step, mismatching weights, tensors compared
        self.fingerprints: list[torch.Tensor] = []
        self.pushes: list[int] = []  # global step of each weight push
        self._wrap()

    def _step(self) -> int:
        return self.trainer.state.global_step

    def _wrap(self):
        llm_generate, sync, compute_loss = self.llm.generate, self.generation.sync_weights, self.trainer.compute_loss
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)

        def generate(*args, **kwargs):
            mismatches, compared = weight_mismatches(self.llm, model)
            self.checks.append({"step": self._step(), "mismatches": mismatches, "compared": compared})
            self.fingerprints.append(engine_fingerprint(self.llm))
            outputs = llm_generate(*args, **kwargs)
            for request in outputs:
                self.generated[self._step()].update(strip_pad(o.token_ids, self.pad_id) for o in request.outputs)
            return outputs

        def sync_weights():
            self.pushes.append(self._step())
            return sync()

        def recorded_loss(model, inputs, *args, **kwargs):
            rows = inputs["completion_ids"].cpu()
            self.trained[self._step()].extend(strip_pad(row, self.pad_id) for row in rows)
            return compute_loss(model, inputs, *args, **kwargs)

        self.llm.generate, self.generation.sync_weights = generate, sync_weights
        self.trainer.compute_loss = recorded_loss

    def close(self):
        """Unwrap the (shared) engine: the next trainer's watch starts from the real ``generate``."""
        del self.llm.generate

    def _generated_by_any_process(self) -> dict:
        """What the engines of all processes generated, per step: dynamic sampling pools kept groups across
        processes, so a process may train on a group another process's engine generated (a collective call)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return self.generated
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, dict(self.generated))
        union = defaultdict(Counter)
        for generated in gathered:
            for step, completions in generated.items():
                union[step] += completions
        return union

    def assert_trained_on_engine_completions(self):
        generated = self._generated_by_any_process()
        assert self.trained, "no training step ran"
        for step, rows in self.trained.items():
            missing = Counter(rows) - generated[step]
            assert not missing, f"step {step}: {sum(missing.values())} trained completions the engine never generated"

    def assert_weights_equal_at_every_generation(self, steps: int, updates_visible: bool = True):
        """``updates_visible``: also require each step's update to have changed the engine (a learning rate large
        enough for the engine's dtype), which shows the equality could fail."""
        # every training step generated; a recipe that evaluates at the end (prorl.yaml) also generates after it
        assert set(range(steps)) <= {check["step"] for check in self.checks} <= set(range(steps + 1)), self.checks
        for check in self.checks:
            assert not check["mismatches"], f"step {check['step']}: engine weights differ: {check['mismatches']}"
        # every engine tensor was compared, the fused ones included
        assert all(check["compared"] == len(self.fingerprints[0]) for check in self.checks)
        if not updates_visible:
            return
        # the updates changed the engine's weights: the check above could fail if a push were missing
        first_per_step = {}
        for check, fingerprint in zip(self.checks, self.fingerprints):
            first_per_step.setdefault(check["step"], fingerprint)
        values = [first_per_step[step] for step in sorted(first_per_step)]
        assert all(not torch.equal(a, b) for a, b in zip(values, values[1:])), "an update left the engine unchanged"

    def assert_one_push_per_step(self, steps: int):
        # one push per training step, and one more where the recipe evaluates after its last step (prorl.yaml)
        assert sorted(self.pushes) in (list(range(steps)), list(range(steps + 1))), self.pushes

    def summary(self) -> dict:
        return {
            "steps": sorted(self.trained),
            "generate_calls_per_step": dict(Counter(check["step"] for check in self.checks)),
            "pushes": self.pushes,
            "weights_equal": [not check["mismatches"] for check in self.checks],
            "tensors_compared": self.checks[0]["compared"] if self.checks else 0,
        }
