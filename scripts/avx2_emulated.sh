#!/usr/bin/env bash
# pytest as an AVX2-only x86 CPU runs it (AMD EPYC Rome: AVX2, no AVX-512, no VNNI), on a machine that has more.
# The tests run under qemu-user with that CPU model, so CPUID (what ONNX Runtime, torch and numpy pick kernels by)
# says AVX2-only, and in a private mount namespace whose /proc/cpuinfo lacks the avx512*/vnni flags (what
# quarl-bench records and reads). Subprocesses run natively with the same /proc/cpuinfo, so pytest runs in one
# process (-n 0: xdist stays loaded, so the project's --dist option parses). Needs qemu-user (apt) and root.
# Timings under emulation mean nothing; numerics are the AVX2 kernels'.
# Usage: scripts/avx2_emulated.sh tests/test_portable_int8.py tests/test_deploy.py [pytest options]
set -euo pipefail
cd "$(dirname "$0")/.."
cpuinfo=$(mktemp)
sed -E '/^flags/ s/ (avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)//g' /proc/cpuinfo > "$cpuinfo"
exec unshare -m bash -c 'mount --bind "$0" /proc/cpuinfo &&
  exec qemu-x86_64 -cpu EPYC-Rome .venv/bin/python -m pytest -n 0 -p no:cacheprovider "$@"' "$cpuinfo" "$@" \
  2> >(grep -v "TCG doesn't support requested feature" >&2)
