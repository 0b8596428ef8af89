"""One BLAS thread: logscope's linear algebra is on small arrays (a few thousand points at most),
where a threaded BLAS mostly spins its threads. Measured on a 500-step run: OpenBLAS's idle
threads raised the CPU time of an analysis from 159 to 274 ms without making it faster, taking
the core the next worker would use (a 100-run fleet went from 165 to 115 ms per run). The CLI
asks for it before numpy is imported: a cold `analyze` of a 200-step log then takes 0.43 instead
of 0.64 s CPU (0.42 vs 0.45 s wall), and the 100,000-step bench log runs as fast (2.22 vs 2.19 s,
within noise; its detectors run in threads of their own). Must run before numpy is imported; a
value the user set is kept."""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded() -> None:
    """Ask the BLAS numpy and scipy load for one thread (unless the environment says)."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
