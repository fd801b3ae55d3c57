"""The period of a Cartesian pendulum for 10 000 amplitudes, in one batched run.

Each pendulum starts at rest at angle th0 and is stopped by an event where it
crosses the vertical (x = 0), a quarter period later. `lx.simulate_batch` runs all
amplitudes at once, sharded over the available devices; the periods are compared
with the exact T = 4 K(sin(th0 / 2)) sqrt(l / g) (K the complete elliptic integral
of the first kind, from scipy).

    python examples/period_sweep.py [--quick] [--out results/period_sweep.png]

Prints the worst relative error and saves the curve.
"""

import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402
from scipy.special import ellipk  # noqa: E402

import lagrax as lx  # noqa: E402


MODEL = lx.systems.pendulum()


def crosses_vertical(t, q, qd, params):
    return q[0]


def main(argv=None):
    p = parser(__doc__, "results/period_sweep.png")
    p.add_argument("--count", type=int, default=10_000, help="number of amplitudes")
    args = p.parse_args(argv)
    check_out(p, args)
    count = 200 if args.quick else args.count
    l, g = MODEL.params["l"], MODEL.params["g"]
    theta0 = jnp.linspace(0.01, 3.0, count)
    q0s = l * jnp.stack([jnp.sin(theta0), -jnp.cos(theta0)], axis=1)
    start = time.perf_counter()
    sol = lx.simulate_batch(
        MODEL.system,
        q0s,
        jnp.zeros_like(q0s),
        MODEL.params,
        t1=100.0,
        event=crosses_vertical,
        rtol=1e-12,
        atol=1e-12,
    )
    period = 4 * np.asarray(sol.ts[:, -1])
    elapsed = time.perf_counter() - start
    exact = 4 * ellipk(np.sin(np.asarray(theta0) / 2) ** 2) * np.sqrt(l / g)
    error = np.abs(period - exact) / exact
    steps = int(np.sum(sol.stats["num_steps"]))
    print(
        f"{count} amplitudes on {len(jax.devices())} device(s) in {elapsed:.1f} s "
        f"(compile included; {steps} steps in all)"
    )
    worst = int(np.argmax(error))
    print(
        f"worst relative error of the period: {error[worst]:.2e} "
        f"(at th0 = {float(theta0[worst]):.3f} rad); median {np.median(error):.1e}"
    )
    plot(np.asarray(theta0), period, exact, error, l, g, args.out)


def plot(theta0, period, exact, error, l, g, path):
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 7), sharex=True, constrained_layout=True
    )
    small = 2 * np.pi * np.sqrt(l / g)
    top.plot(theta0, exact / small, "k-", lw=3, alpha=0.3, label="exact 4 K(k) √(l/g)")
    top.plot(theta0, period / small, "-", lw=1, label="lagrax, batched")
    top.set(ylabel="period / 2π√(l/g)")
    top.legend()
    bottom.semilogy(theta0, error, lw=0.6)
    bottom.set(xlabel="amplitude th0 [rad]", ylabel="relative error of the period")
    for ax in (top, bottom):
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Pendulum period for {len(theta0)} amplitudes (l = {l} m)")
    save(lambda tmp: fig.savefig(tmp, dpi=120), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
