#!/usr/bin/env bash
# Set up .venv with everything quarl-bench needs. Idempotent: re-running only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# CPU torch first: a bare or newer torch requirement would pull a multi-GB CUDA build. PyTorch's CPU wheel index
# gives the CPU build on any Linux machine (pip's configured extra indexes and find-links still apply, so a local
# mirror of the CPU wheel serves it too); only if that install fails is the configured index tried alone.
if ! .venv/bin/python -c "import torch, sys; sys.exit(not torch.__version__.startswith('2.13.0'))" 2>/dev/null; then
    .venv/bin/pip install --quiet --disable-pip-version-check --timeout 15 --retries 0 \
        --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" 2>/dev/null \
        || .venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
.venv/bin/pip install --quiet --disable-pip-version-check -e ".[dev,all]"
# Edge runtimes (LiteRT, ExecuTorch) after the rest, torch held at 2.13.0: xdsl (litert-torch's) pins
# typing-extensions<4.13 while selenium needs >=4.15; LiteRT's converter works with 4.16, so it is put back after.
if ! .venv/bin/python -c "import litert_torch, ai_edge_litert, executorch" 2>/dev/null; then
    echo "torch==2.13.0" > .venv/edge-constraints.txt
    .venv/bin/pip install --quiet --disable-pip-version-check -c .venv/edge-constraints.txt -e ".[edge]" 2>/dev/null \
        || echo "bootstrap: the edge extra did not install: litert-* and executorch-* backends will say so"
    .venv/bin/pip install --quiet --disable-pip-version-check -c .venv/edge-constraints.txt \
        "typing-extensions>=4.15" "cattrs<26" 2>/dev/null
fi
# c-int8's Cortex-M4 build runs under QEMU (tests skip it without these).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v qemu-system-arm >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-arm-none-eabi \
        libnewlib-arm-none-eabi qemu-system-arm) >/dev/null 2>&1 \
        || echo "bootstrap: the Cortex-M toolchain is not installed (no apt access?): its test will be skipped"
fi
# The HTML report's browser test drives Debian's chromium (playwright's own browser download is unreachable here).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v chromedriver >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
        || echo "bootstrap: chromium not installed (no apt access?): the browser test will be skipped"
fi
