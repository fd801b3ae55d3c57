"""The textbook drift study: a Cartesian pendulum under each stabilization.

A point mass on a rod, written in Cartesian coordinates (x, y) with the constraint
x^2 + y^2 = l^2, released near the top. The plain index-1 reduction
(NoStabilization) drifts off the circle; Baumgarte's feedback holds the drift
bounded; Projection keeps every reported state on the circle to round-off.

    python examples/pendulum_drift.py [--t1 50] [--out results/pendulum_drift.png]

Prints the constraint error and energy drift of each run and saves a figure.
"""

import sys
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402

import lagrax as lx  # noqa: E402


STABILIZATIONS = {
    "none (index-1)": lx.NoStabilization(),
    "Baumgarte (5, 5)": lx.Baumgarte(5.0, 5.0),
    "projection": lx.Projection(),
}


def parse_args(argv=None):
    p = parser(__doc__, "results/pendulum_drift.png")
    p.add_argument("--t1", type=float, default=50.0, help="end time [s]")
    p.add_argument("--rtol", type=float, default=1e-6, help="rtol = atol")
    args = p.parse_args(argv)
    if args.quick:
        args.t1 = 5.0
    check_out(p, args)
    return args


def run(t1, rtol):
    model = lx.systems.pendulum()
    q0, qd0 = model.initial_state()
    _, lam0 = lx.accelerations(model.system, 0.0, q0, qd0, model.params)
    print(f"pendulum: q0 = {np.round(q0, 4)}, lambda(0) = {float(lam0[0]):.3f}")
    ts = jnp.linspace(0.0, t1, int(10 * t1) + 1)
    runs = {}
    for name, stabilization in STABILIZATIONS.items():
        start = time.perf_counter()
        sol = lx.simulate(
            model.system,
            q0,
            qd0,
            model.params,
            t1=t1,
            ts=ts,
            solver=dfx.Dopri5(),  # the textbook's ode45
            rtol=rtol,
            atol=rtol,
            stabilization=stabilization,
        )
        jax.block_until_ready(sol)
        runs[name] = sol
        print(
            f"  {name:18s} max|phi| {np.abs(sol.phi).max():.2e}  "
            f"max|phi_dot| {np.abs(sol.phi_dot).max():.2e}  "
            f"energy drift {float(sol.energy[-1] - sol.energy[0]):+.2e} J  "
            f"steps {int(sol.stats['num_steps'])}  "
            f"({time.perf_counter() - start:.2f} s incl. compile)"
        )
    return model, runs


def plot(model, runs, path: Path):
    """Residuals on log axes, energy drift and the rod tension, one line a run."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True)
    tiny = 1e-17  # so that exact zeros show on the log axis
    for name, sol in runs.items():
        ts = np.asarray(sol.ts)
        axes[0, 0].semilogy(ts, np.abs(sol.phi[:, 0]) + tiny, label=name)
        axes[0, 1].semilogy(ts, np.abs(sol.phi_dot[:, 0]) + tiny, label=name)
        axes[1, 0].plot(ts, sol.energy - sol.energy[0], label=name)
        # The rod tension is -2 l lam (J = 2 q^T): the constraint force itself.
        tension = -2 * model.params["l"] * np.asarray(sol.multipliers[:, 0])
        axes[1, 1].plot(ts, tension, lw=0.8, label=name)
    axes[0, 0].set(
        title="position constraint", xlabel="t [s]", ylabel="|x² + y² − l²|  [m²]"
    )
    axes[0, 1].set(title="velocity constraint", xlabel="t [s]", ylabel="|J q̇|  [m²/s]")
    axes[1, 0].set(title="energy drift", xlabel="t [s]", ylabel="E(t) − E(0)  [J]")
    axes[1, 1].set(
        title="rod tension (from the multiplier)", xlabel="t [s]", ylabel="−2 l λ  [N]"
    )
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Cartesian pendulum: constraint drift under each stabilization")
    save(lambda tmp: fig.savefig(tmp, dpi=120), path)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    model, runs = run(args.t1, args.rtol)
    plot(model, runs, args.out)


if __name__ == "__main__":
    sys.exit(main())
