#!/usr/bin/env bash
# Set up .venv with everything quarl-bench needs. Idempotent: re-running only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# CPU torch first: a bare or newer torch requirement would pull a multi-GB CUDA build.
.venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0"
.venv/bin/pip install --quiet --disable-pip-version-check -e ".[dev,all]"
# The HTML report's browser test drives Debian's chromium (playwright's own browser download is unreachable here).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v chromedriver >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
        || echo "bootstrap: chromium not installed (no apt access?): the browser test will be skipped"
fi
