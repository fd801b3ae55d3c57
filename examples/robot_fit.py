"""Identify a robot arm's masses and joint damping from its measured joint angles.

The arm is read from a URDF file (`examples/models/arm3.urdf`: a revolute
shoulder, a continuous elbow about a tilted axis, a prismatic wrist, a tool
fixed to the hand) by `lagrax.bodies.from_urdf`, which makes every link's mass
and inertia and every joint's damping a named parameter. Synthetic encoder data
(joint angles and the wrist's extension, with noise) come from a free swing with
the true values; starting 30-50 % off, `lx.fit` recovers the three link masses
and two dampings by Levenberg-Marquardt, with Jacobians by forward mode through
the whole simulation, and gives their standard errors.

    python examples/robot_fit.py [--quick] [--out results/robot_fit.png]
"""

import pathlib

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402

import lagrax as lx  # noqa: E402
from lagrax import bodies as lb  # noqa: E402


MODEL = lb.from_urdf(pathlib.Path(__file__).parent / "models" / "arm3.urdf")
FITTED = ("upper.mass", "fore.mass", "hand.mass", "shoulder.damping",
          "wrist.damping")  # fmt: skip
TRUE = dict(MODEL.params)
START = {**TRUE, "upper.mass": 0.8, "fore.mass": 1.2, "hand.mass": 0.8,
         "shoulder.damping": 0.3, "wrist.damping": 12.0}  # fmt: skip
NOISE = {"angles": 2e-3, "wrist": 5e-4}  # encoder noise: rad, m
# The swing: shoulder, elbow and wrist started moving (MuJoCo's joint space).
QPOS0, QVEL0 = jnp.array([0.3, -0.5, 0.05]), jnp.array([2.0, -3.0, 0.2])


def observe(traj, params):
    """What the encoders see: the two angles and the wrist's extension."""
    qpos = jax.vmap(lambda q, qd: MODEL.to_joint_space(q, qd)[0])(traj.q, traj.qd)
    return {"angles": qpos[:, :2], "wrist": qpos[:, 2]}


def measurements(ts, seed=0):
    q0, qd0 = MODEL.from_joint_space(QPOS0, QVEL0)
    sol = lx.simulate(MODEL.system, q0, qd0, TRUE, t1=ts[-1], ts=ts)
    clean = observe(sol, TRUE)
    rng = np.random.default_rng(seed)
    return {k: v + NOISE[k] * rng.normal(size=v.shape) for k, v in clean.items()}


def main(argv=None):
    p = parser(__doc__, "results/robot_fit.png")
    args = p.parse_args(argv)
    check_out(p, args)
    t1 = 1.0 if args.quick else 3.0
    ts = jnp.linspace(0.0, t1, int(50 * t1) + 1)
    data = measurements(ts)
    start = MODEL.from_joint_space(QPOS0, QVEL0)  # the masses do not move it
    result = lx.fit(MODEL.system, START, observe, data, ts=ts, initial_state=start,
                    fit=FITTED, positive=FITTED, sigma=NOISE)  # fmt: skip
    print(f"{MODEL.name}: {len(MODEL.coordinates)} coordinates, "
          f"{len(MODEL.constraint_names)} constraints, read from URDF")  # fmt: skip
    print(f"{'':17s} {'true':>8s} {'start':>8s} {'fitted':>8s} {'stderr':>8s}  error")
    errors = []
    for key in FITTED:
        true, fitted = TRUE[key], float(result.params[key])
        stderr = float(result.stderr[key])
        errors.append(abs(fitted - true) / stderr)
        print(f"{key:17s} {true:8.4f} {START[key]:8.4f} {fitted:8.4f} "
              f"{stderr:8.4f}  {(fitted - true) / stderr:+.1f} stderr")  # fmt: skip
    print(f"{result.message}; every fitted value within {max(errors):.1f} standard "
          "errors of the truth")  # fmt: skip
    plot(ts, data, result, start, args.out)


def plot(ts, data, result, start, path):
    curves = {}
    for label, params in (("start", START), ("fitted", result.params)):
        sol = lx.simulate(MODEL.system, *start, params, t1=ts[-1], ts=ts)
        curves[label] = observe(sol, params)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    panels = [
        (lambda o: o["angles"][:, 0], "shoulder angle [rad]"),
        (lambda o: o["angles"][:, 1], "elbow angle [rad]"),
        (lambda o: o["wrist"], "wrist extension [m]"),
    ]
    for ax, (pick, label) in zip(axes.flat, panels, strict=False):
        ax.plot(ts, pick(data), ".", ms=3, color="0.4", label="measured")
        ax.plot(ts, pick(curves["start"]), "--", lw=1, label="start")
        ax.plot(ts, pick(curves["fitted"]), lw=1.5, label="fitted")
        ax.set(xlabel="t [s]", ylabel=label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[1, 1]
    ax.semilogy(result.loss_history, "o-", ms=3)
    ax.set(xlabel="Levenberg-Marquardt iteration", ylabel="sum of squared residuals")
    ax.grid(True, which="both", alpha=0.3)
    text = "\n".join(
        f"{k}: true {TRUE[k]:.3g}, fitted {float(result.params[k]):.4g} "
        f"± {float(result.stderr[k]):.2g}"
        for k in FITTED
    )
    ax.text(0.97, 0.95, text, transform=ax.transAxes, fontsize=8, va="top", ha="right")
    fig.suptitle(f"{MODEL.name} from URDF: link masses and joint damping fitted "
                 "to joint encoders")  # fmt: skip
    save(lambda tmp: fig.savefig(tmp, dpi=120), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
