"""`trl-ext <recipe> --accelerate_config ...`: the shipped launch configs, the accelerate command built from the
flags, a non-editable install that contains the configs, and a real two-process ZeRO-2 run on CPU."""

import os
import shutil
import subprocess
import sys

import pytest

from tests._launch import ROOT
from trl_ext.cli import main
from trl_ext.launch import ACCELERATE_CONFIGS, accelerate_config_path, accelerate_launch_args

RECIPE_ARGS = [
    "--model_name_or_path",
    "some/model",
    "--dataset_name",
    "data.jsonl",
    "--ddp_backend",
    "gloo",
    "--bf16",
    "False",
]
NODE_FLAGS = ["--num_processes", "16", "--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "10.1.2.3",
              "--main_process_port", "29500"]  # fmt: skip


def rank_recording_reward(completions, **kwargs):
    """A reward that notes which process scored (the launched run writes one file per rank)."""
    with open(os.path.join(os.environ["RANKS_DIR"], f"rank-{os.environ.get('RANK', 'none')}"), "w"):
        pass
    return [float(len(c)) for c in completions]


@pytest.mark.parametrize("name", ACCELERATE_CONFIGS)
def test_every_shipped_config_loads_in_accelerate(name):
    from accelerate.commands.config.config_args import load_config_from_file

    path = accelerate_config_path(name)
    assert os.path.dirname(path) == os.path.join(ROOT, "trl_ext", "accelerate_configs")
    config = load_config_from_file(path)
    expected = {"ddp": "MULTI_GPU", "fsdp": "FSDP"}.get(name, "DEEPSPEED")
    assert config.distributed_type.value == expected


def test_zero2_builds_the_accelerate_command_with_node_flags_and_the_recipe_args():
    args = accelerate_launch_args("grpo", [*RECIPE_ARGS[:2], "--accelerate_config", "zero2", *NODE_FLAGS,
                                           *RECIPE_ARGS[2:]])  # fmt: skip
    zero2 = os.path.join(ROOT, "trl_ext", "accelerate_configs", "zero2.yaml")
    assert args == ["--config_file", zero2, *NODE_FLAGS, "--module", "trl_ext.cli", "grpo", *RECIPE_ARGS]


def test_a_config_file_path_is_used_as_it_is(tmp_path):
    own = tmp_path / "mine.yaml"
    shutil.copy(accelerate_config_path("ddp"), own)
    args = accelerate_launch_args("dapo", ["--accelerate_config", str(own), *RECIPE_ARGS])
    assert args[:2] == ["--config_file", str(own)] and args[2:5] == ["--module", "trl_ext.cli", "dapo"]


def test_cli_hands_the_built_command_to_accelerate(monkeypatch):
    import accelerate.commands.launch as accelerate_launch

    launched = []
    monkeypatch.setattr(accelerate_launch, "launch_command", launched.append)
    assert main(["prorl", "--accelerate_config", "zero3", "--num_processes", "2", *RECIPE_ARGS]) == 0
    (namespace,) = launched
    assert namespace.config_file.endswith(os.path.join("accelerate_configs", "zero3.yaml"))
    assert namespace.num_processes == 2 and namespace.module is True
    assert namespace.training_script == "trl_ext.cli" and namespace.training_script_args == ["prorl", *RECIPE_ARGS]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--accelerate_config", "zero4"], r"`--accelerate_config`='zero4' is neither a config shipped"),
        (["--accelerate_config"], r"`--accelerate_config` needs a value"),
    ],
)
def test_unknown_accelerate_config_is_a_clear_error(argv, message):
    with pytest.raises(ValueError, match=message):
        main(["grpo", *RECIPE_ARGS, *argv])


def test_unknown_yaml_keys_are_named_before_launching(tmp_path):
    config = tmp_path / "recipe.yaml"
    config.write_text("num_processes: 8\nlearning_rate: 1.0e-6\n")
    with pytest.raises(ValueError, match=r"Unknown keys in the --config YAML: \['--num_processes', '8'\]"):
        accelerate_launch_args("grpo", ["--config", str(config), "--accelerate_config", "ddp", *RECIPE_ARGS])


@pytest.mark.slow
def test_non_editable_install_ships_the_launch_configs(tmp_path):
    source = tmp_path / "src"  # a copy: building in place would write build/ into the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "tests", "*.egg-info", "build", "__pycache__"))
    target = tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
               "--target", str(target), str(source)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    shipped = sorted(p.stem for p in (target / "trl_ext" / "accelerate_configs").glob("*.yaml"))
    assert shipped == sorted(ACCELERATE_CONFIGS)
    assert not (target / "trl_ext" / "accelerate_configs" / "zero2.yaml").is_symlink()


@pytest.mark.slow
def test_zero2_launch_trains_with_two_cpu_processes(tmp_path, tiny_policy_path):
    """DeepSpeed on CPU: gloo, use_cpu off and no mixed precision (the shipped config asks for bf16)."""
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(f'{{"prompt": "What is {i} + {i}?"}}\n' for i in range(16)))
    command = [
        sys.executable, "-m", "trl_ext.cli", "grpo", "--accelerate_config", "zero2", "--num_processes", "2",
        "--mixed_precision", "no", "--main_process_port", "29641", "--model_name_or_path", tiny_policy_path,
        "--dataset_name", str(data), "--reward_funcs", "tests.cli.test_launch:rank_recording_reward", "--output_dir",
        str(tmp_path / "out"), "--num_generations", "4", "--per_device_train_batch_size", "4",
        "--max_completion_length", "4", "--max_steps", "1", "--bf16", "False", "--gradient_checkpointing", "False",
        "--report_to", "none", "--save_strategy", "no", "--use_cpu", "False", "--ddp_backend", "gloo",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT, "RANKS_DIR": str(tmp_path)}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "out" / "model.safetensors").exists()
    assert sorted(p.name for p in tmp_path.glob("rank-*")) == ["rank-0", "rank-1"]


FAKE_SRUN = """#!/bin/bash
ntasks=$SLURM_NNODES
while [[ "$1" == --* ]]; do [[ "$1" == --ntasks=* ]] && ntasks=${1#--ntasks=}; shift; done
for ((i = 0; i < ntasks; i++)); do SLURM_PROCID=$i "$@"; done
"""
FAKE_RECORDER = """#!/bin/bash
printf '%s\\n' "$@" > "$RECORD_DIR/$(basename "$0")-${SLURM_PROCID:-server}"
"""
# Read by every non-interactive bash (BASH_ENV): the scripts' `kill "$SERVER"` of the background vLLM server first
# waits for the fake server, which records its command line and exits; on a loaded host the kill could otherwise
# end it before it had recorded anything (the real server runs until killed).
FAKE_KILL = """kill() { wait "$@" 2>/dev/null; builtin kill "$@" 2>/dev/null; }
"""


def _fake_slurm(tmp_path, nodes: list[str]) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"srun": FAKE_SRUN, "scontrol": "#!/bin/bash\nprintf '%s\\n' " + " ".join(nodes) + "\n"}
    scripts |= {"trl-ext": FAKE_RECORDER, "trl": FAKE_RECORDER}
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "bash_env").write_text(FAKE_KILL)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD_DIR": str(tmp_path),
            "BASH_ENV": str(tmp_path / "bash_env"),
            "SLURM_NNODES": str(len(nodes)), "SLURM_JOB_NODELIST": ",".join(nodes), "MODEL": "org/policy"}  # fmt: skip


def _recorded(tmp_path, name: str) -> list[str]:
    return (tmp_path / name).read_text().splitlines()


def test_slurm_script_starts_one_launcher_per_node_with_its_rank(tmp_path):
    env = _fake_slurm(tmp_path, ["gpu-a", "gpu-b"])
    script = os.path.join(ROOT, "examples", "slurm", "train_multinode.sbatch")
    subprocess.run(["bash", script, *RECIPE_ARGS], env=env, check=True, timeout=60)
    for rank in (0, 1):
        argv = _recorded(tmp_path, f"trl-ext-{rank}")
        assert argv[0] == "prorl" and argv[-len(RECIPE_ARGS) :] == RECIPE_ARGS
        launch = accelerate_launch_args(argv[0], argv[1:])
        flags = dict(zip(launch[2:12:2], launch[3:12:2], strict=True))
        assert flags == {"--num_machines": "2", "--num_processes": "16", "--machine_rank": str(rank),
                         "--main_process_ip": "gpu-a", "--main_process_port": "29500"}  # fmt: skip
        assert launch[0:2] == ["--config_file", accelerate_config_path("zero3")]


def test_slurm_script_with_a_vllm_server_node(tmp_path):
    env = _fake_slurm(tmp_path, ["gpu-a", "gpu-b", "gpu-c"])
    script = os.path.join(ROOT, "examples", "slurm", "train_with_vllm_server.sbatch")
    subprocess.run(["bash", script, *RECIPE_ARGS[2:]], env=env, check=True, timeout=60)
    server = _recorded(tmp_path, "trl-0")
    assert server[:3] == ["vllm-serve", "--model", "org/policy"]
    for rank in (0, 1):
        argv = _recorded(tmp_path, f"trl-ext-{rank}")
        assert argv[argv.index("--machine_rank") + 1] == str(rank)
        assert argv[argv.index("--main_process_ip") + 1] == "gpu-b"
        assert argv[argv.index("--vllm_server_host") + 1] == "gpu-a" and "server" in argv
        launch = accelerate_launch_args(argv[0], [*argv[1:], "--dataset_name", "data.jsonl"])
        assert launch[launch.index("--module") + 2] == "dapo"
