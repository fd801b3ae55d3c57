"""A chaotic double pendulum fitted over 10 s: multiple vs single shooting.

A double pendulum (point masses, Cartesian coordinates, two length constraints)
released from 120 degrees is chaotic: a small change of a parameter changes the
motion completely after a few seconds, so the squared error of a simulation
against 10 s of data is a landscape of narrow local minima, and a fit by single
shooting from 30 % off stops in one of them. `lx.fit(..., segments=K)` cuts the
horizon into K segments whose start states (the nodes) are unknowns beside the
parameters, started on the data (marker positions, and velocities by finite
differences), with continuity between segments held as equality constraints
(Bock 1987). It recovers the two lengths, the mass ratio and gravity to within
their standard errors.

    python examples/chaotic_fit.py [--quick] [--out results/chaotic_fit.png]

Prints true, starting and fitted values with standard errors for both methods and
saves the data against both fits.
"""

import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402

import lagrax as lx  # noqa: E402


TRUE = {"l1": 1.0, "l2": 0.8, "m2": 0.7, "g": 9.81}
START = {"l1": 1.3, "l2": 0.56, "m2": 0.91, "g": 7.0}  # 30 % off each
UNITS = {"l1": "m", "l2": "m", "m2": "kg", "g": "m/s^2"}
NOISE = 1e-3  # marker noise, m
RATE = 100  # markers per second


def lagrangian(t, q, qd, p):
    """q = (x1, y1, x2, y2), the two masses (m1 = 1 kg, m2) in metres."""
    v1, v2 = qd[:2], qd[2:]
    kinetic = 0.5 * (v1 @ v1) + 0.5 * p["m2"] * (v2 @ v2)
    return kinetic - p["g"] * (q[1] + p["m2"] * q[3])


def constraints(t, q, p):
    link = q[2:] - q[:2]
    return jnp.stack([q[:2] @ q[:2] - p["l1"] ** 2, link @ link - p["l2"] ** 2])


SYSTEM = lx.System(lagrangian, constraints)


def initial_state(p):
    """Both links at 120 degrees from hanging, at rest: on the constraints for
    any lengths, so the lengths are fitted through the start as well."""
    angle = 2 * jnp.pi / 3
    r1 = p["l1"] * jnp.array([jnp.sin(angle), -jnp.cos(angle)])
    r2 = r1 + p["l2"] * jnp.array([jnp.sin(angle), -jnp.cos(angle)])
    return jnp.concatenate([r1, r2]), jnp.zeros(4)


def observe(traj, params):
    """Markers on both masses."""
    return traj.q


def measurements(ts, seed=0):
    sol = lx.simulate(
        SYSTEM, *initial_state(TRUE), TRUE, t1=ts[-1], ts=ts, rtol=1e-11, atol=1e-11
    )
    rng = np.random.default_rng(seed)
    return np.asarray(sol.q) + NOISE * rng.normal(size=sol.q.shape)


def main(argv=None):
    p = parser(__doc__, "results/chaotic_fit.png")
    args = p.parse_args(argv)
    check_out(p, args)
    t1 = 3.0 if args.quick else 10.0
    ts = jnp.linspace(0.0, t1, int(RATE * t1) + 1)
    data = measurements(ts)
    common = dict(ts=ts, initial_state=initial_state, positive=tuple(TRUE), sigma=NOISE)
    results = {}
    for method, extra in (
        ("single shooting", {}),
        # Nodes every 0.2 s, started on the markers; velocities by differences.
        (
            "multiple shooting",
            dict(
                segments=int(5 * t1),
                states_guess=(data, np.gradient(data, np.asarray(ts), axis=0)),
            ),
        ),
    ):
        start = time.perf_counter()
        result = lx.fit(
            SYSTEM, START, observe, data, **common, **extra, max_steps=100,
            progress=False,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        results[method] = result
        print(
            f"{method}: {result.steps} steps, {seconds:.1f} s with compilation, "
            f"residuals {np.sqrt(result.loss / data.size):.3g} sigma; "
            f"{result.message}"
        )
    print(f"{'':4s} {'true':>8s} {'start':>8s} " + "  ".join(
        f"{m:>27s}" for m in results
    ))  # fmt: skip
    for key in TRUE:
        cells = []
        for result in results.values():
            value, stderr = float(result.params[key]), float(result.stderr[key])
            cells.append(
                f"{value:9.5f} ± {stderr:7.1e} ({(value - TRUE[key]) / stderr:+5.1f})"
            )
        print(f"{key:4s} {TRUE[key]:8.4f} {START[key]:8.4f} " + "  ".join(cells))
    print("(value ± standard error (its distance from the truth in standard errors))")
    plot(ts, data, results, args.out)


def plot(ts, data, results, path):
    """The outer marker's x against time for the data and both fits, the loss
    histories, and the outer mass's path."""
    curves = {}
    for method, result in results.items():
        params = result.params
        # As the measurements were simulated (the same compiled solve).
        sol = lx.simulate(SYSTEM, *initial_state(params), params, t1=ts[-1], ts=ts)
        curves[method] = np.asarray(sol.q)
    fig = plt.figure(figsize=(12, 7), constrained_layout=True)
    grid = fig.add_gridspec(2, 2)
    ax = fig.add_subplot(grid[0, :])
    ax.plot(ts, data[:, 2], ".", ms=2, color="0.4", label="markers (1 mm noise)")
    styles = {"single shooting": ("--", "C3"), "multiple shooting": ("-", "C0")}
    for method, q in curves.items():
        line, color = styles[method]
        ax.plot(ts, q[:, 2], line, lw=1.2, color=color, label=f"{method} fit")
    ax.set(xlabel="t [s]", ylabel="outer mass x2 [m]")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, alpha=0.3)
    ax = fig.add_subplot(grid[1, 0])
    for method, result in results.items():
        _, color = styles[method]
        ax.semilogy(result.loss_history, "o-", ms=2, color=color, label=method)
    ax.axhline(data.size, color="0.5", lw=0.8, ls=":", label="noise level (N)")
    ax.set(xlabel="iteration", ylabel="sum of squared residuals (sigma units)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax = fig.add_subplot(grid[1, 1])
    ax.plot(data[:, 2], data[:, 3], ".", ms=1, color="0.6", label="markers")
    ax.plot(*curves["multiple shooting"][:, 2:].T, lw=0.6, color="C0",
            label="multiple shooting")  # fmt: skip
    ax.set(xlabel="x2 [m]", ylabel="y2 [m]", aspect="equal")
    ax.legend(fontsize=8, loc="upper right")
    shooting = results["multiple shooting"]
    text = "multiple shooting:\n" + "\n".join(
        f"{k}: true {TRUE[k]:.4g}, fitted {float(shooting.params[k]):.6g} "
        f"± {float(shooting.stderr[k]):.1g} {UNITS[k]}"
        for k in TRUE
    )
    fig.axes[1].text(
        0.97, 0.3, text, transform=fig.axes[1].transAxes, fontsize=8, ha="right",
        va="bottom", bbox=dict(facecolor="white", edgecolor="0.8"),
    )  # fmt: skip
    fig.suptitle(
        f"Chaotic double pendulum, {ts[-1]:.0f} s of markers, parameters 30 % off "
        "at the start"
    )
    save(lambda tmp: fig.savefig(tmp, dpi=120), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
