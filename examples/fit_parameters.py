"""Recover the spring, bar mass and damper of a slider pendulum from noisy data.

Synthetic measurements of the slider pendulum (block on a sprung, damped track
with a pinned bar): the block position x1(t), the bar angle th2(t) and the normal
force of the track on the block, which lagrax predicts as a Lagrange multiplier.
Starting 40 % off, `lx.fit` recovers k, m2 and c by Levenberg-Marquardt, with
Jacobians by forward mode through the whole simulation (and through the
consistent initial state), and gives their standard errors.

    python examples/fit_parameters.py [--quick] [--out results/fit_parameters.png]

Prints true, starting and fitted values with standard errors and saves data
against the fitted model.
"""

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402

import lagrax as lx  # noqa: E402


MODEL = lx.systems.slider_pendulum()
TRUE = {**MODEL.params, "k": 10.0, "m2": 0.3, "c": 0.05}
START = {**MODEL.params, "k": 14.0, "m2": 0.18, "c": 0.07}  # +40 %, -40 %, +40 %
FITTED = ("k", "m2", "c")
UNITS = {"k": "N/m", "m2": "kg", "c": "N s/m"}
NOISE = {"x1": 2e-3, "th2": 1e-2, "track": 2e-2}  # sensor noise: m, rad, N


def observe(traj, params):
    """What the sensors see: block position, bar angle, track normal force."""
    return {"x1": traj.q[:, 0], "th2": traj.q[:, 5], "track": traj.multipliers[:, 0]}


def measurements(ts, seed=0):
    q0, qd0 = MODEL.initial_state(TRUE)
    clean = observe(lx.simulate(MODEL.system, q0, qd0, TRUE, t1=ts[-1], ts=ts), TRUE)
    rng = np.random.default_rng(seed)
    return {k: v + NOISE[k] * rng.normal(size=v.shape) for k, v in clean.items()}


def main(argv=None):
    p = parser(__doc__, "results/fit_parameters.png")
    args = p.parse_args(argv)
    check_out(p, args)
    t1 = 1.5 if args.quick else 4.0
    ts = jnp.linspace(0.0, t1, int(40 * t1) + 1)
    data = measurements(ts)
    result = lx.fit(
        MODEL.system,
        START,
        observe,
        data,
        ts=ts,
        initial_state=MODEL.initial_state,
        fit=FITTED,
        positive=FITTED,
        sigma=NOISE,
    )
    print(f"{'':4s} {'true':>9s} {'start':>9s} {'fitted':>9s} {'stderr':>9s}  error")
    for key in FITTED:
        true, fitted = TRUE[key], float(result.params[key])
        stderr = float(result.stderr[key])
        print(
            f"{key:4s} {true:9.4f} {START[key]:9.4f} {fitted:9.4f} {stderr:9.4f}  "
            f"{(fitted - true) / stderr:+.1f} stderr  [{UNITS[key]}]"
        )
    plot(ts, data, result, args.out)


def plot(ts, data, result, path):
    """Data, the starting guess and the fit, one panel per measured quantity."""
    curves = {}
    for label, params in (("start", START), ("fitted", result.params)):
        q0, qd0 = MODEL.initial_state(params)
        sol = lx.simulate(MODEL.system, q0, qd0, params, t1=ts[-1], ts=ts)
        curves[label] = observe(sol, params)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    panels = [
        ("x1", "block position x1 [m]"),
        ("th2", "bar angle th2 [rad]"),
        ("track", "track normal force λ₀ [N]"),
    ]
    for ax, (key, label) in zip(axes.flat, panels, strict=False):
        ax.plot(ts, data[key], ".", ms=3, color="0.4", label="measured")
        ax.plot(ts, curves["start"][key], "--", lw=1, label="start")
        ax.plot(ts, curves["fitted"][key], lw=1.5, label="fitted")
        ax.set(xlabel="t [s]", ylabel=label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[1, 1]
    ax.semilogy(result.loss_history, "o-", ms=3)
    ax.set(xlabel="Levenberg-Marquardt iteration", ylabel="sum of squared residuals")
    ax.grid(True, which="both", alpha=0.3)
    text = "\n".join(
        f"{k}: true {TRUE[k]:.3g}, fitted {float(result.params[k]):.4g} "
        f"± {float(result.stderr[k]):.2g} {UNITS[k]}"
        for k in FITTED
    )
    ax.text(0.03, 0.05, text, transform=ax.transAxes, fontsize=9, va="bottom")
    fig.suptitle(
        "Slider pendulum: k, m2 and c fitted to positions and a reaction force"
    )
    save(lambda tmp: fig.savefig(tmp, dpi=120), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
