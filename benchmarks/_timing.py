"""Wall-clock timing shared by the benchmark scripts."""

import time

import jax
import numpy as np


def timed(fn, repeats):
    """(first call time, median of the following repeats, last result).

    The first call includes any compilation; the median is the warm time.
    """
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return first, float(np.median(times)), out
