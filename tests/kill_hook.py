"""A quarl-bench process that SIGKILLs a process right after its Nth stored row: itself by default (a kill -9 at a
known point, whatever the machine's speed), or the process ``$QUARL_TEST_KILL_PID`` names (a Ray node's raylet)
and then goes on. Run as ``python kill_hook.py ROWS quarl-bench-arguments...``."""

from __future__ import annotations

import os
import signal
import sys

from quarl_bench import store
from quarl_bench.cli import main

put, written = store.ResultStore.put, []


def put_then_kill(self, result, replace=False):
    inserted = put(self, result, replace)
    written.append(inserted)
    if len(written) == int(sys.argv[1]):
        os.kill(int(os.environ.get("QUARL_TEST_KILL_PID", os.getpid())), signal.SIGKILL)
    return inserted


if __name__ == "__main__":
    store.ResultStore.put = put_then_kill
    sys.exit(main(sys.argv[2:]))
