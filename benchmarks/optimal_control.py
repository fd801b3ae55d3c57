"""The cart-pole swing-up, lagrax beside CasADi Opti + IPOPT, in one process.

The problem of examples/swing_up.py (and issue 14): cart 1 kg, pole a point mass
0.1 kg at 0.5 m, |u| <= 10 N, T = 2 s, from hanging at rest to upright at rest,
minimising h sum u_k^2 over 50 piecewise-constant intervals.

- lagrax: `lx.optimize_controls(..., segments=50)`, each segment 2 fixed Tsit5
  steps, IPOPT's interior-point method in JAX, on two models of the cart-pole:
  the one CasADi solves, (x, theta), written as a Lagrangian (the same model
  side by side), and the model of examples/swing_up.py in Cartesian coordinates
  with the rod constraint (a constrained system: 6 states per node, each
  segment projected onto the constraints);
- CasADi Opti + IPOPT as a user would write it: the cart-pole in (x, theta)
  (minimal coordinates, the textbook equations), direct multiple shooting with
  RK4 and 4 substeps per interval, nodes started on the same straight line in
  theta, u = 0, IPOPT with the exact Hessian (CasADi's default) and tol 1e-8.

Both controls are then simulated by scipy (DOP853, rtol = atol = 1e-12) in the
minimal-coordinate model: the terminal error there is an independent check of
each. Reports iterations, warm and first-call time, the cost, the ratio of the
warm times, and a batch of 64 swing-ups with pole masses 0.05 to 0.2 kg in one
`jax.vmap` call against 64 times one.

    python benchmarks/optimal_control.py [--batch 64]

Needs `pip install -e ".[bench]"` (casadi).
"""

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import swing_up as problem  # noqa: E402
from _peers import rk4  # noqa: E402

import lagrax as lx  # noqa: E402


jax.config.update("jax_enable_x64", True)
P = problem.PARAMS
T, K, U_MAX = problem.T, problem.K, problem.U_MAX


def minimal_rhs(state, u, p=P):
    """(x, theta, xd, thetad)' for the cart-pole, theta from hanging."""
    x, th, xd, thd = state
    m, big_m, l, g = p["m"], p["M"], p["l"], p["g"]
    s, c = np.sin(th), np.cos(th)
    mass = np.array([[big_m + m, m * l * c], [m * l * c, m * l**2]])
    rhs = np.array([u + m * l * s * thd**2, -m * g * l * s])
    return np.concatenate([[xd, thd], np.linalg.solve(mass, rhs)])


def terminal_check(u):
    """The controls simulated in minimal coordinates by scipy: the terminal
    angle error [deg] and the largest terminal speed (x', theta')."""
    state = np.zeros(4)
    edges = np.linspace(0.0, T, K + 1)
    for k in range(K):
        sol = solve_ivp(lambda t, y, force: minimal_rhs(y, force),
                        (edges[k], edges[k + 1]), state, args=(u[k],),
                        method="DOP853", rtol=1e-12, atol=1e-12)  # fmt: skip
        state = sol.y[:, -1]
    return abs(np.degrees(state[1]) - 180.0), max(abs(state[2]), abs(state[3]))


def minimal_lagrangian(t, q, qd, p):
    """The cart-pole in (x, theta), theta from hanging: the model CasADi solves."""
    th, (xd, thd) = q[1], qd
    m, big_m, l, g = p["m"], p["M"], p["l"], p["g"]
    kinetic = 0.5 * (big_m + m) * xd**2 + m * l * xd * thd * jnp.cos(th)
    return kinetic + 0.5 * m * l**2 * thd**2 + m * g * l * jnp.cos(th)


def minimal_forces(t, q, qd, p):
    return jnp.stack([problem.CONTROL(t, p["u"]), 0.0])


MINIMAL = lx.System(minimal_lagrangian, forces=minimal_forces)


def upright_minimal(q, qd, p):
    return jnp.stack([q[1] - jnp.pi, qd[0], qd[1]])


def solve_minimal(params=P):
    """The swing-up in (x, theta): nodes on the straight line in theta, u = 0."""
    theta = np.linspace(0.0, np.pi, K + 1)
    rate = np.full(K + 1, np.pi / T)
    rate[[0, -1]] = 0.0
    guess = (np.stack([0 * theta, theta], 1), np.stack([0 * theta, rate], 1))
    return lx.optimize_controls(
        MINIMAL, {**params, "u": jnp.zeros(K)}, jnp.zeros(2), jnp.zeros(2), t1=T,
        controls="u", cost=problem.effort,
        terminal=upright_minimal,
        bounds={"u": (-U_MAX, U_MAX)}, segments=K, states_guess=guess,
    )  # fmt: skip


def lagrax_swing_up(solve=problem.solve):
    start = time.perf_counter()
    result = jax.block_until_ready(solve())
    first = time.perf_counter() - start
    warm = []
    for _ in range(3):
        start = time.perf_counter()
        result = jax.block_until_ready(solve())
        warm.append(time.perf_counter() - start)
    return dict(
        iterations=int(result.iterations), first=first, warm=min(warm),
        cost=float(result.cost), violation=float(result.max_violation),
        u=np.asarray(result.params["u"]), converged=bool(result.converged),
    )  # fmt: skip


def casadi_swing_up(substeps=4):
    import casadi as ca

    m, big_m, l, g = P["m"], P["M"], P["l"], P["g"]
    start = time.perf_counter()
    state, u = ca.SX.sym("x", 4), ca.SX.sym("u")
    th, thd = state[1], state[3]
    mass = ca.vertcat(
        ca.horzcat(big_m + m, m * l * ca.cos(th)),
        ca.horzcat(m * l * ca.cos(th), m * l**2),
    )
    rhs = ca.vertcat(u + m * l * ca.sin(th) * thd**2, -m * g * l * ca.sin(th))
    f = ca.Function("f", [state, u], [ca.vertcat(state[2], thd, ca.solve(mass, rhs))])
    end = rk4(f, state, u, T / K / substeps, substeps)
    step = ca.Function("step", [state, u], [end])

    opti = ca.Opti()
    nodes = opti.variable(4, K + 1)
    controls = opti.variable(K)
    opti.minimize(T / K * ca.sumsqr(controls))
    opti.subject_to(nodes[:, 0] == 0)
    for k in range(K):
        opti.subject_to(nodes[:, k + 1] == step(nodes[:, k], controls[k]))
    opti.subject_to(nodes[1, K] == np.pi)
    opti.subject_to(nodes[2, K] == 0)
    opti.subject_to(nodes[3, K] == 0)
    opti.subject_to(opti.bounded(-U_MAX, controls, U_MAX))
    theta = np.linspace(0.0, np.pi, K + 1)
    rate = np.full(K + 1, np.pi / T)
    rate[[0, -1]] = 0.0
    opti.set_initial(nodes, np.stack([0 * theta, theta, 0 * theta, rate]))
    opti.set_initial(controls, 0.0)
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "tol": 1e-8})
    sol = opti.solve()
    first = time.perf_counter() - start
    warm = []
    for _ in range(3):
        start = time.perf_counter()
        sol = opti.solve()
        warm.append(time.perf_counter() - start)
    stats = opti.stats()
    return dict(
        iterations=stats["iter_count"], first=first, warm=min(warm),
        cost=float(sol.value(T / K * ca.sumsqr(controls))),
        violation=float(stats["iterations"]["inf_pr"][-1]),
        u=np.asarray(sol.value(controls)), converged=stats["success"],
    )  # fmt: skip


def batch(size, solve=problem.solve):
    """`size` swing-ups (pole masses 0.05 to 0.2 kg) in one vmapped call,
    against one of them: warm times and how many converged."""
    masses = jax.numpy.linspace(0.05, 0.2, size)

    @jax.jit
    def many(masses):
        return jax.vmap(lambda m: solve({**P, "m": m}))(masses)

    one = jax.jit(lambda m: solve({**P, "m": m}))
    jax.block_until_ready(many(masses))
    jax.block_until_ready(one(masses[0]))
    start = time.perf_counter()
    results = jax.block_until_ready(many(masses))
    t_many = time.perf_counter() - start
    t_one, iterations_one = [], []
    for m in masses[:: max(1, size // 8)]:
        start = time.perf_counter()
        alone = jax.block_until_ready(one(m))
        t_one.append(time.perf_counter() - start)
        iterations_one.append(int(alone.iterations))
    iterations = np.asarray(results.iterations)
    return dict(
        many=t_many, one=float(np.mean(t_one)),
        converged=int(np.sum(results.converged)), iterations=iterations,
        violation=float(np.max(results.max_violation)),
        # Time per member per iteration in the batch (which iterates until its
        # slowest member has converged) against one problem alone.
        per_iteration=(t_many / (size * iterations.max()))
        / (float(np.sum(t_one)) / float(np.sum(iterations_one))),
    )  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="batch size, 0 to skip")
    args = parser.parse_args(argv)
    ours = {
        "lagrax (x, theta)": lagrax_swing_up(solve_minimal),
        "lagrax Cartesian": lagrax_swing_up(),
    }
    peer = casadi_swing_up()
    print("cart-pole swing-up, 50 intervals, |u| <= 10 N, T = 2 s")
    print(f"{'':18s} {'iter':>5s} {'warm s':>8s} {'first s':>8s} {'cost':>9s} "
          f"{'violation':>10s} {'end angle err':>14s} {'end speed':>10s}")  # fmt: skip
    for name, out in (*ours.items(), ("CasADi + IPOPT", peer)):
        angle, speed = terminal_check(out["u"])
        print(
            f"{name:18s} {out['iterations']:5d} {out['warm']:8.3f} "
            f"{out['first']:8.2f} {out['cost']:9.4f} {out['violation']:10.1e} "
            f"{angle:11.2e} deg {speed:10.1e}"
            + ("" if out["converged"] else "  NOT converged")
        )
    print("(end errors: each control simulated by scipy DOP853 at 1e-12 in (x, theta))")
    for name, out in ours.items():
        print(
            f"{name} / CasADi + IPOPT: warm time {out['warm'] / peer['warm']:.2f}x, "
            f"iterations {out['iterations'] / peer['iterations']:.2f}x"
        )
    if args.batch:
        for name, solve in (
            ("(x, theta)", solve_minimal),
            ("Cartesian", problem.solve),
        ):
            out = batch(args.batch, solve)
            its = out["iterations"]
            print(
                f"batch of {args.batch} {name} (pole mass 0.05-0.2 kg) in one vmapped "
                f"call: {out['many']:.2f} s = {out['many'] / out['one']:.1f} x one "
                f"({out['one']:.3f} s); {out['converged']}/{args.batch} converged, "
                f"iterations {its.min()}-{its.max()} (mean {its.mean():.1f}), max "
                f"violation {out['violation']:.1e}; a member's iteration in the "
                f"batch costs {out['per_iteration']:.2f} x one alone"
            )


if __name__ == "__main__":
    main()
