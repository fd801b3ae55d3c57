"""Sixty-four cart-pole swing-ups, one per pole mass, in one vmapped call.

The swing-up of examples/swing_up.py (cart 1 kg, pole 0.5 m, |u| <= 10 N,
T = 2 s, hanging at rest to upright at rest, minimum effort) for pole masses
from 0.05 to 0.2 kg: `jax.vmap` of `lx.optimize_controls` over the mass, jitted
once. Every problem keeps its own interior-point iterations, bounds and
terminal conditions; the loop runs until the last one has converged.

    python examples/swing_up_batch.py [--quick] [--out results/swing_up_batch.png]

Prints, for the batch, how many converged, their iterations, the largest
constraint violation and terminal error (each optimal force re-simulated with
adaptive steps), the time of the batch and (not with --quick) of one problem
alone; plots the optimal forces and the effort against the pole mass.
"""

import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import swing_up as problem  # noqa: E402
from _common import check_out, parser, save  # noqa: E402


def solve_many(masses):
    """One swing-up per pole mass, in one call."""
    return jax.vmap(lambda m: problem.solve({**problem.PARAMS, "m": m}))(masses)


def main(argv=None):
    p = parser(__doc__, "results/swing_up_batch.png")
    args = p.parse_args(argv)
    check_out(p, args)
    size = 8 if args.quick else 64
    masses = jnp.linspace(0.05, 0.2, size)
    many = jax.jit(solve_many)

    start = time.perf_counter()
    jax.block_until_ready(many(masses))
    first = time.perf_counter() - start
    start = time.perf_counter()
    results = jax.block_until_ready(many(masses))
    warm = time.perf_counter() - start

    converged = np.asarray(results.converged)
    iterations = np.asarray(results.iterations)
    print(
        f"{size} swing-ups (pole mass {float(masses[0]):.2f}-{float(masses[-1]):.2f} "
        f"kg) in one vmapped call: {int(converged.sum())}/{size} converged in "
        f"{iterations.min()}-{iterations.max()} iterations; largest constraint "
        f"violation {float(jnp.max(results.max_violation)):.1e}, largest "
        f"terminal error re-simulated {float(jnp.max(results.terminal_error)):.1e}"
    )
    print(f"batch: {warm:.2f} s (first call with compilation {first:.1f} s)")
    if not args.quick:
        one = jax.jit(lambda m: problem.solve({**problem.PARAMS, "m": m}))
        jax.block_until_ready(one(masses[size // 2]))
        times = []
        for m in masses[:: size // 8]:
            start = time.perf_counter()
            jax.block_until_ready(one(m))
            times.append(time.perf_counter() - start)
        print(
            f"one problem alone: {np.mean(times):.3f} s on average over 8 masses; "
            f"the batch took {warm / np.mean(times):.0f} x that (the vmapped loop "
            "runs until the slowest member has converged)"
        )
    save(lambda path: plot(masses, results, path), args.out)
    return results


def plot(masses, results, path):
    masses = np.asarray(masses)
    u = np.asarray(results.params["u"])
    ts = np.asarray(problem.CONTROL.boundaries)  # t_0 .. t_K
    colors = plt.cm.viridis((masses - masses.min()) / np.ptp(masses))
    fig, (ax_u, ax_cost) = plt.subplots(1, 2, figsize=(11, 4.2))
    for force, color in zip(u, colors, strict=True):
        ax_u.stairs(force, ts, baseline=None, color=color, lw=1.0)
    ax_u.axhline(problem.U_MAX, color="0.5", ls=":", lw=1)
    ax_u.axhline(-problem.U_MAX, color="0.5", ls=":", lw=1)
    ax_u.set(xlabel="t [s]", ylabel="force on the cart u [N]",
             title="optimal forces (colour: pole mass)")  # fmt: skip
    bar = fig.colorbar(
        plt.cm.ScalarMappable(
            norm=plt.Normalize(masses.min(), masses.max()), cmap="viridis"
        ),
        ax=ax_u,
    )
    bar.set_label("pole mass [kg]")
    ok = np.asarray(results.converged)
    ax_cost.plot(masses[ok], np.asarray(results.cost)[ok], "o-", ms=3,
                 label="converged")  # fmt: skip
    if not ok.all():
        ax_cost.plot(masses[~ok], np.asarray(results.cost)[~ok], "rx",
                     label="not converged")  # fmt: skip
    ax_cost.set(xlabel="pole mass [kg]", ylabel=r"effort $h \sum u_k^2$ [N$^2$ s]",
                title="minimum effort of the swing-up")  # fmt: skip
    iters = ax_cost.twinx()
    iters.plot(masses, np.asarray(results.iterations), ".", color="C1", ms=4)
    iters.set_ylabel("interior-point iterations", color="C1")
    ax_cost.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
