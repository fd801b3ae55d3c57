"""Saddle-point solvers under vmap: time per solve of a batch of small dense systems.

Compares lagrax's SchurCholesky (the default), DenseLU, LeastSquares and
AugmentedLagrangian with a naive
`jnp.linalg.solve` of the (n + m) KKT matrix, measured side by side in one run. The
figures are ratios on this machine, not absolute claims.

    python benchmarks/saddle_vmap.py [--batch 1000] [--repeats 50]
"""

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


def naive_kkt(mass, jac, force, rhs):
    n, m = mass.shape[0], jac.shape[0]
    kkt = jnp.block([[mass, -jac.T], [jac, jnp.zeros((m, m), mass.dtype)]])
    sol = jnp.linalg.solve(kkt, jnp.concatenate([force, rhs]))
    return sol[:n], sol[n:]


def problems(batch, n, m, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(batch, n, n))
    mass = a @ np.swapaxes(a, 1, 2) + n * np.eye(n)
    jac = rng.normal(size=(batch, m, n))
    return (
        jnp.asarray(mass),
        jnp.asarray(jac),
        jnp.asarray(rng.normal(size=(batch, n))),
        jnp.asarray(rng.normal(size=(batch, m))),
    )


def best_time(fn, args, repeats):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    candidates = {
        "SchurCholesky": lambda *a: lx.SchurCholesky().solve(*a).qdd,
        "DenseLU": lambda *a: lx.DenseLU().solve(*a).qdd,
        "LeastSquares": lambda *a: lx.LeastSquares().solve(*a).qdd,
        "AugmentedLagrangian": lambda *a: lx.AugmentedLagrangian().solve(*a).qdd,
        "jnp.linalg.solve(KKT)": lambda *a: naive_kkt(*a)[0],
    }
    print(
        f"batch {args.batch}, float64, {jax.devices()[0].platform}; median of "
        f"{args.repeats}; time per batch and ratio to SchurCholesky"
    )
    for n, m in [(4, 2), (6, 4), (7, 6), (12, 8)]:
        data = problems(args.batch, n, m)
        times = {
            name: best_time(jax.jit(jax.vmap(fn)), data, args.repeats)
            for name, fn in candidates.items()
        }
        base = times["SchurCholesky"]
        row = ", ".join(
            f"{name} {t * 1e6:8.1f} us ({t / base:4.1f}x)" for name, t in times.items()
        )
        print(f"n={n:2d} m={m:2d}: {row}")


if __name__ == "__main__":
    main()
