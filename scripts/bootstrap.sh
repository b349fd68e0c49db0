#!/usr/bin/env bash
# Set up .venv with everything quarl-bench needs. Idempotent: re-running only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# CPU torch first: a bare or newer torch requirement would pull a multi-GB CUDA build.
.venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0"
.venv/bin/pip install --quiet --disable-pip-version-check -e ".[dev,all]"
