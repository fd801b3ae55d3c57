"""Swing a cart-pole up from hanging to upright by gradient descent on its force.

The cart-pole in constrained Cartesian coordinates: the cart position x and the
bob (xb, yb), with the rod constraint (xb - x)^2 + yb^2 = l^2. The horizontal
force on the cart is a smooth spline in time, bounded by |u| < u_max through
`lx.saturate`; its knot values live in the parameters, and optax's Adam
minimizes the final-state error plus effort, with gradients through the whole
constrained simulation.

    python examples/swing_up.py [--quick] [--out results/swing_up.png]

Prints the final angle error and saves a plot and an animation (.gif beside it).
"""

import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from _common import check_out, parser, save  # noqa: E402
from matplotlib import animation  # noqa: E402

import lagrax as lx  # noqa: E402


T = 2.5  # s, time allowed for the swing-up
PARAMS = {"M": 1.0, "m": 0.3, "l": 0.5, "g": 9.81, "u_max": 8.0}
CONTROL = lx.CubicSpline(0.0, T, num_knots=26)


def lagrangian(t, q, qd, p):
    x, xb, yb = q
    kinetic = 0.5 * p["M"] * qd[0] ** 2 + 0.5 * p["m"] * (qd[1] ** 2 + qd[2] ** 2)
    return kinetic - p["m"] * p["g"] * yb


def constraints(t, q, p):
    x, xb, yb = q
    return jnp.stack([(xb - x) ** 2 + yb**2 - p["l"] ** 2])


def force(t, p):
    return lx.saturate(CONTROL(t, p["u"]), p["u_max"])


def forces(t, q, qd, p):
    return jnp.stack([force(t, p), 0.0, 0.0])


SYSTEM = lx.System(lagrangian, constraints, forces)
Q0 = jnp.array([0.0, 0.0, -PARAMS["l"]])  # hanging at rest
SIM = dict(
    solver=dfx.Tsit5(), rtol=1e-6, atol=1e-6, stabilization=lx.Baumgarte(10.0, 10.0)
)


def objective(u):
    """Upright (1 - yb/l = 0), at rest, cart home, little effort."""
    p = {**PARAMS, "u": u}
    sol = lx.simulate(SYSTEM, Q0, jnp.zeros(3), p, t1=T, **SIM)
    q, qd = sol.q[-1], sol.qd[-1]
    upright = 1 - q[2] / p["l"]
    effort = jnp.mean(force(CONTROL.knots, p) ** 2) / p["u_max"] ** 2
    return upright + 0.05 * qd @ qd + 0.2 * q[0] ** 2 + 0.01 * effort


def optimize(steps):
    # Start pumping at the pendulum's natural frequency to break the symmetry.
    omega = np.sqrt(PARAMS["g"] / PARAMS["l"])
    u = jnp.asarray(2.0 * np.sin(omega * np.asarray(CONTROL.knots)))
    optimizer = optax.adam(0.3)
    state = optimizer.init(u)
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    start = time.perf_counter()
    history = []
    for k in range(steps):
        value, grad = value_and_grad(u)
        updates, state = optimizer.update(grad, state, u)
        u = optax.apply_updates(u, updates)
        history.append(float(value))
        if k % 100 == 0 or k == steps - 1:
            print(f"step {k:4d}  objective {float(value):.4e}  "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)  # fmt: skip
    return u, history


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
    u, history = optimize(30 if args.quick else 1000)
    params = {**PARAMS, "u": u}
    ts = jnp.linspace(0.0, T, 26 if args.quick else 76)  # the animation's frames
    sol = lx.simulate(SYSTEM, Q0, jnp.zeros(3), params, t1=T, ts=ts, **SIM)
    theta = angle(np.asarray(sol.q))
    forces_n = np.asarray(force(ts, params))
    print(
        f"final angle {theta[-1]:.2f} deg (error {abs(abs(theta[-1]) - 180):.2f} deg), "
        f"final speed {float(jnp.linalg.norm(sol.qd[-1])):.3f} m/s, "
        f"cart at {float(sol.q[-1, 0]):+.3f} m, max |u| {np.abs(forces_n).max():.2f} N "
        f"(bound {PARAMS['u_max']} N)"
    )
    plot(ts, sol, theta, forces_n, history, args.out)
    animate(ts, sol, forces_n, gif)


def plot(ts, sol, theta, forces_n, history, path):
    ts = np.asarray(ts)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    axes[0, 0].plot(ts, np.unwrap(np.radians(theta)) * 180 / np.pi)
    axes[0, 0].axhline(180, color="k", lw=0.8, ls="--")
    axes[0, 0].axhline(-180, color="k", lw=0.8, ls="--")
    axes[0, 0].set(xlabel="t [s]", ylabel="rod angle from hanging [deg]")
    axes[0, 1].plot(ts, forces_n)
    for bound in (PARAMS["u_max"], -PARAMS["u_max"]):
        axes[0, 1].axhline(bound, color="r", lw=0.8, ls="--")
    axes[0, 1].set(xlabel="t [s]", ylabel="force on the cart u [N]")
    axes[1, 0].plot(ts, sol.q[:, 0], label="cart position x")
    axes[1, 0].set(xlabel="t [s]", ylabel="cart position x [m]")
    tension = axes[1, 0].twinx()
    # The constraint force: the rod pulls the bob with 2 l lam along the rod.
    tension.plot(ts, -2 * PARAMS["l"] * sol.multipliers[:, 0], color="tab:orange")
    tension.set_ylabel("rod tension −2 l λ [N]", color="tab:orange")
    axes[1, 1].semilogy(history)
    axes[1, 1].set(xlabel="Adam step", ylabel="objective")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    fig.suptitle("Cart-pole swing-up, optimized through the constrained simulation")
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
