#!/usr/bin/env bash
# Builds .venv-triton/: a real Triton Inference Server (the one bundled in NVIDIA's nvidia-pytriton wheel,
# CPU-capable) plus CPU PyTorch to run the exported TorchScript models. It is kept apart from .venv because
# pytriton needs numpy<2; the main environment only has the client (tritonclient). Idempotent.
#   bash deploy/triton/setup_env.sh       # ~1 min here; tests/serve_app/test_triton.py uses it when present
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
# torch 2.13.0 is the CPU build this machine keeps on disk (an unpinned torch would pull a CUDA build of
# several GB); TorchScript files written by the main environment's torch load in it.
TORCH=${CARDCAT_TRITON_TORCH:-torch==2.13.0}
rm -f .venv-triton/.ready  # tests/serve_app/test_triton.py runs only on an env that finished building
if [ ! -x .venv-triton/bin/python ]; then
  "$PYTHON" -m venv .venv-triton
fi
pip=(.venv-triton/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "nvidia-pytriton==0.7.0" "numpy<2" "$TORCH" 2>&1 | grep -v "^WARNING: Location" || true
.venv-triton/bin/python -c "import numpy, pytriton.triton, torch; assert numpy.__version__ < '2'"
touch .venv-triton/.ready
echo "setup_env: .venv-triton ready ($(.venv-triton/bin/python -c 'import torch; print("torch", torch.__version__)'))"
