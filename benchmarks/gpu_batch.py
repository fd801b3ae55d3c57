"""The batch benchmark on a GPU: double pendulums, B = 10^3 .. 10^6.

The batch of benchmarks/batch.py (Cartesian point-mass double pendulums, fixed
RK4 steps) through `vmap` of `lx.simulate`, for growing batch sizes, on the
first GPU. Prints system-steps/s and the device's peak memory. Does nothing
(exit 0, one line) where JAX sees no GPU.

    python benchmarks/gpu_batch.py [--max-batch 1000000] [--steps 1000]
"""

import argparse

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from _timing import timed  # noqa: E402
from batch import PARAMS, initial_states, lagrax_batch  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-batch", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        print("gpu_batch: no GPU visible to JAX; nothing to do")
        return
    print(f"{gpu.device_kind}, jax {jax.__version__}, {args.steps} RK4 steps")
    solve = lagrax_batch(1e-3, args.steps)
    p = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    batch = 1000
    while batch <= args.max_batch:
        q0, v0 = (jax.device_put(jnp.asarray(a), gpu) for a in initial_states(batch))
        first, warm, q = timed(lambda q0=q0, v0=v0: solve(q0, v0, p), args.repeats)
        stats = gpu.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use", 0) / 2**30
        print(f"  B = {batch:8d}  {warm:8.3f} s  "
              f"{batch * args.steps / warm / 1e6:9.1f} M system-steps/s  "
              f"compile {first - warm:5.1f} s  peak memory {peak:6.2f} GiB",
              flush=True)  # fmt: skip
        batch *= 10


if __name__ == "__main__":
    main()
