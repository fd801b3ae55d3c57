"""Swing a cart-pole up from hanging to upright, at rest, by optimal control.

The cart-pole of the issue and of CasADi's examples: cart 1 kg, pole a point
mass 0.1 kg at 0.5 m, |u| <= 10 N on the cart, T = 2 s, from hanging at rest to
upright at rest, minimising the effort h sum u_k^2. In constrained Cartesian
coordinates: the cart position x and the bob (xb, yb), with the rod constraint
(xb - x)^2 + yb^2 = l^2. The force is piecewise constant on 50 intervals;
`lx.optimize_controls` solves it by direct multiple shooting (50 segments, an
interior-point method with exact second derivatives) with the bound and the
terminal conditions held exactly.

    python examples/swing_up.py [--quick] [--out results/swing_up.png]

Prints the iterations, the constraint violation, the cost and the terminal
error of the optimal force re-simulated with adaptive steps; saves a plot and an
animation (.gif beside it). benchmarks/optimal_control.py solves the same problem
with CasADi + IPOPT beside it.
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


T, K, U_MAX = 2.0, 50, 10.0  # horizon [s], control intervals, force bound [N]
PARAMS = {"M": 1.0, "m": 0.1, "l": 0.5, "g": 9.81}
CONTROL = lx.PiecewiseConstant(0.0, T, num_knots=K)


def lagrangian(t, q, qd, p):
    x, xb, yb = q
    kinetic = 0.5 * p["M"] * qd[0] ** 2 + 0.5 * p["m"] * (qd[1] ** 2 + qd[2] ** 2)
    return kinetic - p["m"] * p["g"] * yb


def constraints(t, q, p):
    x, xb, yb = q
    return jnp.stack([(xb - x) ** 2 + yb**2 - p["l"] ** 2])


def forces(t, q, qd, p):
    return jnp.stack([CONTROL(t, p["u"]), 0.0, 0.0])


SYSTEM = lx.System(lagrangian, constraints, forces)
Q0, QD0 = jnp.array([0.0, 0.0, -PARAMS["l"]]), jnp.zeros(3)  # hanging at rest


def effort(nodes, p):
    """h sum u_k^2: the integral of u^2 for a piecewise-constant force."""
    return (T / K) * jnp.sum(p["u"] ** 2)


def upright_at_rest(q, qd, p):
    """Bob above the cart, cart and bob at rest horizontally. (The bob's height
    and vertical speed follow from the rod; asking for them too would make the
    conditions dependent. The first guess picks upright over hanging.)"""
    x, xb, yb = q
    return jnp.stack([xb - x, qd[0], qd[1]])


def states_guess(params):
    """Nodes on a straight line in the rod angle, from hanging to upright."""
    theta = np.linspace(0.0, np.pi, K + 1)
    rate = np.full(K + 1, np.pi / T)
    rate[[0, -1]] = 0.0
    l = params["l"]
    q = np.stack([0 * theta, l * np.sin(theta), -l * np.cos(theta)], axis=1)
    qd = np.stack(
        [0 * theta, l * np.cos(theta) * rate, l * np.sin(theta) * rate], axis=1
    )
    return jnp.asarray(q), jnp.asarray(qd)


def solve(params=PARAMS, progress=False):
    """The swing-up for these parameters (a start of zero force)."""
    return lx.optimize_controls(
        SYSTEM, {**params, "u": jnp.zeros(K)}, Q0, QD0, t1=T, controls="u",
        cost=effort, terminal=upright_at_rest, bounds={"u": (-U_MAX, U_MAX)},
        segments=K, states_guess=states_guess(params), progress=progress,
    )  # fmt: skip


def angle(q):
    """Angle of the rod from hanging, in degrees (180 = upright)."""
    return np.degrees(np.arctan2(q[:, 1] - q[:, 0], -q[:, 2]))


def main(argv=None):
    p = parser(__doc__, "results/swing_up.png")
    args = p.parse_args(argv)
    gif = args.out.with_suffix(".gif")
    check_out(p, args)
    if gif.exists() and not args.force:
        p.error(f"{gif} exists; pass --force to overwrite it")
    history = []

    def record(k, cost, violation, kkt, *_):
        history.append((int(k), float(cost), float(violation), float(kkt)))

    start = time.perf_counter()
    jax.block_until_ready(solve(progress=record))
    first = time.perf_counter() - start
    history.clear()
    start = time.perf_counter()
    result = jax.block_until_ready(solve(progress=record))
    warm = time.perf_counter() - start
    for k, cost, violation, kkt in history:
        print(f"iteration {k:2d}  cost {cost:9.4f}  violation {violation:.1e}  "
              f"KKT error {kkt:.1e}")  # fmt: skip
    theta_end = angle(np.asarray(result.trajectory.q))[-1]
    print(
        f"{'converged' if bool(result.converged) else 'NOT converged'} in "
        f"{int(result.iterations)} iterations ({warm:.2f} s; first call with "
        f"compilation {first:.1f} s): cost {float(result.cost):.4f}, constraint "
        f"violation {float(result.max_violation):.1e}; re-simulated with adaptive "
        f"steps: terminal error {float(result.terminal_error):.1e}, final angle "
        f"{abs(theta_end):.5f} deg"
    )
    frames = 26 if args.quick else 101
    ts = jnp.linspace(0.0, T, frames)
    params = result.params
    sol = lx.simulate(
        SYSTEM, Q0, QD0, params, t1=T, ts=ts, jump_ts=CONTROL.boundaries,
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    forces_n = np.asarray(CONTROL(ts, params["u"]))
    plot(ts, sol, angle(np.asarray(sol.q)), params, np.array(history), args.out)
    animate(ts, sol, forces_n, gif)
    return result


def plot(ts, sol, theta, params, history, path):
    ts = np.asarray(ts)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    axes[0, 0].plot(ts, np.unwrap(np.radians(theta)) * 180 / np.pi)
    axes[0, 0].axhline(180, color="k", lw=0.8, ls="--")
    axes[0, 0].set(xlabel="t [s]", ylabel="rod angle from hanging [deg]")
    edges = np.asarray(CONTROL.boundaries)
    u = np.asarray(params["u"])
    axes[0, 1].stairs(u, edges, baseline=None, label="u (50 intervals)")
    for bound in (U_MAX, -U_MAX):
        axes[0, 1].axhline(bound, color="r", lw=0.8, ls="--")
    axes[0, 1].set(xlabel="t [s]", ylabel="force on the cart u [N]")
    axes[1, 0].plot(ts, sol.q[:, 0], label="cart position x")
    axes[1, 0].set(xlabel="t [s]", ylabel="cart position x [m]")
    tension = axes[1, 0].twinx()
    # The constraint force: the rod pulls the bob with 2 l lam along the rod.
    tension.plot(ts, -2 * PARAMS["l"] * sol.multipliers[:, 0], color="tab:orange")
    tension.set_ylabel("rod tension −2 l λ [N]", color="tab:orange")
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
    fig.suptitle(
        "Cart-pole swing-up by lx.optimize_controls (multiple shooting, interior point)"
    )
    save(lambda tmp: fig.savefig(tmp, dpi=110), path)
    plt.close(fig)


def animate(ts, sol, forces_n, path):
    q = np.asarray(sol.q)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    left = min(q[:, 0].min(), q[:, 1].min()) - 0.4
    right = max(q[:, 0].max(), q[:, 1].max()) + 0.4
    ax.set(xlim=(left, right), ylim=(-0.7, 0.7), aspect="equal", xlabel="x [m]")
    ax.axhline(0, color="0.6", lw=1)
    (rod,) = ax.plot([], [], "k-", lw=2)
    (bob,) = ax.plot([], [], "o", ms=12, color="tab:orange")
    cart = plt.Rectangle((0, -0.06), 0.24, 0.12, color="tab:blue")
    ax.add_patch(cart)
    arrow = ax.annotate("", xy=(0, 0), xytext=(0, 0), arrowprops=dict(color="red"))
    label = ax.text(left + 0.05, 0.55, "")

    def frame(i):
        x, xb, yb = q[i]
        rod.set_data([x, xb], [0, yb])
        bob.set_data([xb], [yb])
        cart.set_x(x - 0.12)
        arrow.xy = (x + 0.05 * forces_n[i], 0)
        arrow.set_position((x, 0))
        label.set_text(f"t = {ts[i]:.2f} s   u = {forces_n[i]:+.1f} N")
        return rod, bob, cart, arrow, label

    anim = animation.FuncAnimation(fig, frame, frames=len(q), blit=False)
    save(lambda tmp: anim.save(tmp, writer=animation.PillowWriter(fps=30)), path)
    plt.close(fig)


if __name__ == "__main__":
    main()
