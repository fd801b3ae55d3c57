"""XLA's CPU thread pool, made wide enough for jaxlib 0.10's LAPACK kernels.

jaxlib < 0.11.2 runs a batched LAPACK call (Cholesky, triangular solve, LU,
SVD, ...) by queueing chunks of the batch on XLA's CPU pool ("tf_XLAEigen") and
blocking one of its threads until they are done. XLA runs independent
operations of one program concurrently on the same pool, so as many concurrent
batched LAPACK calls as the pool has threads block every thread, and the
chunks they wait for never run: the process hangs (seen in lagrax with two
triangular solves of a forward-mode fit on a 2-core machine, where the pool has
two threads; `gdb` shows both in `jax::ParallelBatchMap`). jaxlib 0.11.2
compiles that parallel path out.

The pool's size is read once, from the environment variable `NPROC`, when the
CPU backend starts (else the number of cores). `import lagrax` sets it, where
the user has not and no backend has started, to at least `POOL_FLOOR` threads:
a hang then needs that many LAPACK calls at once. The extra threads sleep
unless there is work.
"""

import os

import jaxlib


POOL_FLOOR = 16


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _affected() -> bool:
    try:
        version = tuple(int(p) for p in jaxlib.__version__.split(".")[:3])
    except ValueError:  # a development build: assume the fix is not in it
        return True
    return version < (0, 11, 2)


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # pragma: no cover - another JAX
        return True  # cannot tell: leave the environment alone


def widen_cpu_pool(threads: int = POOL_FLOOR) -> None:
    """Ask for a CPU pool of at least `threads` (and the cores), unless the user
    set `NPROC` or JAX's backends have started (then it is too late)."""
    if "NPROC" in os.environ or not _affected() or _backends_started():
        return
    os.environ["NPROC"] = str(max(cores(), threads))
