"""The CLI runs numpy's BLAS on one thread (logscope.blas), unless the user said otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "verl_tuned.log"

# After `logscope analyze`, in the same interpreter: the environment variable, and the thread
# count OpenBLAS itself reports (found in the libraries the process has loaded).
CHILD = """
import ctypes, json, os, sys
sys.argv = ["logscope", "analyze", sys.argv[1], "--no-cache", "--fail-on", "never"]
from logscope.cli.main import main
try:
    main()
except SystemExit:
    pass
threads = None
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if "openblas" in path and path.endswith(".so"):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(lib, name):
                threads = getattr(lib, name)()
                break
        break
print(json.dumps({"env": os.environ.get("OPENBLAS_NUM_THREADS"), "threads": threads,
                  "numpy": "numpy" in sys.modules}))
"""


def _child(env_value: str | None) -> dict:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
    }
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(LOG)], capture_output=True, text=True, env=env, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_analyze_runs_blas_on_one_thread_and_keeps_a_users_setting() -> None:
    mine = _child(None)
    assert mine["numpy"] and mine["env"] == "1"
    if mine["threads"] is not None:  # a numpy built on OpenBLAS (the wheels are)
        assert mine["threads"] == 1
    theirs = _child("2")
    assert theirs["env"] == "2"
    if theirs["threads"] is not None:
        assert theirs["threads"] in (2, os.cpu_count())  # OpenBLAS may cap it at the cores
