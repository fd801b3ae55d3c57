"""Swing a double pendulum on a cart up to upright-upright, at rest, by optimal control.

A cart of 1 kg on a rail carries two pendulums in series, point masses of 0.1 kg
on massless rods of 0.5 m; a force |u| <= 20 N on the cart swings both from
hanging at rest to balanced upright at rest in T = 3 s, minimising the effort
h sum u_k^2. In constrained Cartesian coordinates q = (x, x1, y1, x2, y2) with
the two rod constraints; the force is piecewise constant on 60 intervals and
`lx.optimize_controls` solves it by direct multiple shooting with the bound and
the terminal conditions held exactly. The peers' way (Adam, then L-BFGS on a
penalty, single shooting) needed four tuning attempts and two minutes to reach
a terminal error of 3e-6 here.

    python examples/double_swing_up.py [--quick] [--out results/double_swing_up.png]

Prints the iterations, the constraint violation, the cost and the terminal
error of the optimal force re-simulated with adaptive steps; saves a plot and an
animation (.gif beside it).
"""

import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import check_out, parser, save  # noqa: E402
from matplotlib import animation  # noqa: E402

import lagrax as lx  # noqa: E402


T, K, U_MAX = 3.0, 60, 20.0  # horizon [s], control intervals, force bound [N]
STEPS = 8  # Tsit5 steps per interval
PARAMS = {"M": 1.0, "m1": 0.1, "m2": 0.1, "l1": 0.5, "l2": 0.5, "g": 9.81}
CONTROL = lx.PiecewiseConstant(0.0, T, num_knots=K)


def lagrangian(t, q, qd, p):
    x, x1, y1, x2, y2 = q
    kinetic = (
        0.5 * p["M"] * qd[0] ** 2
        + 0.5 * p["m1"] * (qd[1] ** 2 + qd[2] ** 2)
        + 0.5 * p["m2"] * (qd[3] ** 2 + qd[4] ** 2)
    )
    return kinetic - p["g"] * (p["m1"] * y1 + p["m2"] * y2)


def constraints(t, q, p):
    x, x1, y1, x2, y2 = q
    return jnp.stack(
        [
            (x1 - x) ** 2 + y1**2 - p["l1"] ** 2,
            (x2 - x1) ** 2 + (y2 - y1) ** 2 - p["l2"] ** 2,
        ]
    )


def forces(t, q, qd, p):
    return jnp.zeros(5).at[0].set(CONTROL(t, p["u"]))


SYSTEM = lx.System(lagrangian, constraints, forces)


def hanging(p):
    return jnp.array([0.0, 0.0, -p["l1"], 0.0, -p["l1"] - p["l2"]]), jnp.zeros(5)


def effort(nodes, p):
    """h sum u_k^2: the integral of u^2 for a piecewise-constant force."""
    return (T / K) * jnp.sum(p["u"] ** 2)


def upright_at_rest(q, qd, p):
    """Each bob above the point it hangs from, everything at rest horizontally.
    (Heights and vertical speeds follow from the rods; the first guess picks
    upright over hanging.)"""
    x, x1, y1, x2, y2 = q
    return jnp.stack([x1 - x, x2 - x1, qd[0], qd[1], qd[3]])


def states_guess(p):
    """Nodes on a straight line in both rod angles, from hanging to upright, the
    cart still."""
    theta = np.linspace(0.0, np.pi, K + 1)
    rate = np.full(K + 1, np.pi / T)
    rate[[0, -1]] = 0.0
    l1, l2 = float(p["l1"]), float(p["l2"])
    s, c, z = np.sin(theta), np.cos(theta), 0 * theta
    q = np.stack([z, l1 * s, -l1 * c, (l1 + l2) * s, -(l1 + l2) * c], axis=1)
    qd = np.stack(
        [z, l1 * c * rate, l1 * s * rate, (l1 + l2) * c * rate, (l1 + l2) * s * rate],
        axis=1,
    )
    return jnp.asarray(q), jnp.asarray(qd)


def solve(params=PARAMS, progress=False):
    """The swing-up for these parameters (a start of zero force)."""
    q0, qd0 = hanging(params)
    return lx.optimize_controls(
        SYSTEM, {**params, "u": jnp.zeros(K)}, q0, qd0, t1=T, controls="u",
        cost=effort, terminal=upright_at_rest, bounds={"u": (-U_MAX, U_MAX)},
        segments=K, states_guess=states_guess(params), progress=progress,
        steps_per_segment=STEPS, condense=False,
    )  # fmt: skip


def angles(q):
    """Both rod angles from hanging, in degrees (180 = upright), unwrapped."""
    x, x1, y1, x2, y2 = np.asarray(q).T
    first = np.arctan2(x1 - x, -y1)
    second = np.arctan2(x2 - x1, -(y2 - y1))
    return np.degrees(np.unwrap(first)), np.degrees(np.unwrap(second))


def main(argv=None):
    p = parser(__doc__, "results/double_swing_up.png")
    args = p.parse_args(argv)
    gif = args.out.with_suffix(".gif")
    check_out(p, args)
    if gif.exists() and not args.force:
        p.error(f"{gif} exists; pass --force to overwrite it")
    history = []

    def record(k, cost, violation, kkt, *_):
        history.append((int(k), float(cost), float(violation), float(kkt)))

    start = time.perf_counter()
    result = jax.block_until_ready(solve(progress=record))
    first = time.perf_counter() - start
    warm = None
    if not args.quick:  # the solve again, compiled: what a second problem costs
        history.clear()
        start = time.perf_counter()
        result = jax.block_until_ready(solve(progress=record))
        warm = time.perf_counter() - start
    for k, cost, violation, kkt in history:
        print(f"iteration {k:2d}  cost {cost:9.4f}  violation {violation:.1e}  "
              f"KKT error {kkt:.1e}")  # fmt: skip
    first_end, second_end = (a[-1] for a in angles(result.trajectory.q))
    timing = f"{first:.1f} s with compilation" + (
        "" if warm is None else f", {warm:.1f} s compiled"
    )
    print(
        f"{'converged' if bool(result.converged) else 'NOT converged'} in "
        f"{int(result.iterations)} iterations ({timing}): cost "
        f"{float(result.cost):.4f}, constraint violation "
        f"{float(result.max_violation):.1e}; re-simulated with adaptive steps: "
        f"terminal error {float(result.terminal_error):.1e}, final angles "
        f"{first_end:.3f} and {second_end:.3f} deg"
    )
    frames = 31 if args.quick else 151
    ts = jnp.linspace(0.0, T, frames)
    params = result.params
    q0, qd0 = hanging(params)
    sol = lx.simulate(
        SYSTEM, q0, qd0, params, t1=T, ts=ts, jump_ts=CONTROL.boundaries,
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    forces_n = np.asarray(CONTROL(ts, params["u"]))
    plot(ts, sol, params, np.array(history), args.out)
    animate(ts, sol, forces_n, gif)
    return result


def plot(ts, sol, params, history, path):
    ts = np.asarray(ts)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    first, second = angles(sol.q)
    axes[0, 0].plot(ts, first, label="rod 1 (on the cart)")
    axes[0, 0].plot(ts, second, label="rod 2")
    for upright in (180, -180):
        axes[0, 0].axhline(upright, color="k", lw=0.8, ls="--")
    axes[0, 0].set(xlabel="t [s]", ylabel="rod angle from hanging [deg]")
    axes[0, 0].legend()
    u = np.asarray(params["u"])
    axes[0, 1].stairs(u, np.asarray(CONTROL.boundaries), baseline=None,
                      label=f"u ({K} intervals)")  # fmt: skip
    for bound in (U_MAX, -U_MAX):
        axes[0, 1].axhline(bound, color="r", lw=0.8, ls="--")
    axes[0, 1].set(xlabel="t [s]", ylabel="force on the cart u [N]")
    axes[1, 0].plot(ts, sol.q[:, 0], label="cart position x")
    axes[1, 0].set(xlabel="t [s]", ylabel="cart position x [m]")
    tension = axes[1, 0].twinx()
    # The rods pull with 2 l lam along themselves.
    for i, (key, color) in enumerate((("l1", "tab:orange"), ("l2", "tab:green"))):
        tension.plot(ts, -2 * PARAMS[key] * sol.multipliers[:, i], color=color,
                     label=f"rod {i + 1}")  # fmt: skip
    tension.set_ylabel("rod tensions −2 l λ [N]")
    tension.legend(loc="lower right")
    if len(history):
        axes[1, 1].semilogy(history[:, 0], history[:, 2], "o-", ms=3,
                            label="constraint violation")  # fmt: skip
        axes[1, 1].semilogy(history[:, 0], history[:, 3], "s-", ms=3,
                            label="KKT error")  # fmt: skip
        axes[1, 1].axhline(1e-8, color="k", lw=0.8, ls=":", label="tolerance")
        axes[1, 1].legend()
    axes[1, 1].set(xlabel="interior-point iteration", ylabel="error")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    fig.suptitle("Double pendulum on a cart, swung up by lx.optimize_controls")
    save(lambda tmp: fig.savefig(tmp, dpi=110), path)
    plt.close(fig)


def animate(ts, sol, forces_n, path):
    q = np.asarray(sol.q)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    left = min(q[:, 0].min(), q[:, 1].min(), q[:, 3].min()) - 0.4
    right = max(q[:, 0].max(), q[:, 1].max(), q[:, 3].max()) + 0.4
    ax.set(xlim=(left, right), ylim=(-1.15, 1.15), aspect="equal", xlabel="x [m]")
    ax.axhline(0, color="0.6", lw=1)
    (rods,) = ax.plot([], [], "k-", lw=2)
    (bobs,) = ax.plot([], [], "o", ms=10, color="tab:orange")
    cart = plt.Rectangle((0, -0.06), 0.24, 0.12, color="tab:blue")
    ax.add_patch(cart)
    arrow = ax.annotate("", xy=(0, 0), xytext=(0, 0), arrowprops=dict(color="red"))
    label = ax.text(left + 0.05, 1.0, "")

    def frame(i):
        x, x1, y1, x2, y2 = q[i]
        rods.set_data([x, x1, x2], [0, y1, y2])
        bobs.set_data([x1, x2], [y1, y2])
        cart.set_x(x - 0.12)
        arrow.xy = (x + 0.02 * forces_n[i], 0)
        arrow.set_position((x, 0))
        label.set_text(f"t = {ts[i]:.2f} s   u = {forces_n[i]:+.1f} N")
        return rods, bobs, cart, arrow, label

    anim = animation.FuncAnimation(fig, frame, frames=len(q), blit=False)
    save(lambda tmp: anim.save(tmp, writer=animation.PillowWriter(fps=30)), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
