"""One BLAS thread per worker: logscope's linear algebra is on small arrays (a few thousand
points at most), where a threaded BLAS mostly spins its threads. Measured on a 500-step run:
OpenBLAS's idle threads raised the CPU time of an analysis from 159 to 274 ms without making
it faster, taking the core the next worker would use (a 100-run fleet went from 165 to 115
ms per run). A single analysis keeps the default: on a 100,000-step run the threads gain ~6 %
wall time. Must run before numpy is imported; a value the user set is kept."""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded() -> None:
    """Ask the BLAS numpy and scipy load for one thread (unless the environment says)."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
