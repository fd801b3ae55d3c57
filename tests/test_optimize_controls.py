"""optimize_controls against closed-form and scipy answers.

A point mass on a rail (two coordinates, the rail a constraint) pushed by a
piecewise-constant force from rest at 0 to rest at 1: the integration over each
interval is exact (the motion is quadratic in time), so the transcription's
optimum is the least-norm solution of two linear equations in the force values,
and with bounds or a speed limit the solution of a small convex QP, which scipy
computes independently. The cart-pole swing-up is examples/swing_up.py (run by
test_examples) and benchmarks/optimal_control.py (beside CasADi + IPOPT).
"""

import warnings

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import lagrax as lx


T, K = 2.0, 8
H = T / K
CONTROL = lx.PiecewiseConstant(0.0, T, num_knots=K)
PARAMS = {"mass": 2.0, "u": jnp.zeros(K), "goal": 1.0}


def lagrangian(t, q, qd, p):
    return 0.5 * p["mass"] * qd @ qd


def rail(t, q, p):
    # A rail along (2, 1) through the origin: x - 2 y = 0.
    return jnp.stack([q[0] - 2 * q[1]])


def push(t, q, qd, p):
    # The force acts along the rail (unit vector (2, 1) / sqrt 5).
    return CONTROL(t, p["u"]) * jnp.array([2.0, 1.0]) / jnp.sqrt(5.0)


SYSTEM = lx.System(lagrangian, rail, push)
Q0 = QD0 = jnp.zeros(2)
DIRECTION = np.array([2.0, 1.0]) / np.sqrt(5.0)


def effort(nodes, p):
    return H * jnp.sum(p["u"] ** 2)


def at_goal_at_rest(q, qd, p):
    # Distance along the rail and speed; the rail holds the rest.
    return jnp.stack([q @ DIRECTION - p["goal"], qd @ DIRECTION])


def linear_map(mass=2.0):
    """(s(T), v(T)) = A u for s the distance along the rail: exact."""
    t_k = H * np.arange(K)
    return np.stack([H * (T - t_k - H / 2), np.full(K, H)]) / mass


def scipy_qp(lower=-np.inf, upper=np.inf, speed_limit=None, goal=1.0, mass=2.0):
    a, b = linear_map(mass), np.array([goal, 0.0])
    constraints = [{"type": "eq", "fun": lambda u: a @ u - b}]
    if speed_limit is not None:
        speeds = np.tril(np.ones((K, K))) * H / mass  # v at t_1 .. t_K
        constraints.append({"type": "ineq", "fun": lambda u: speed_limit - speeds @ u})
    result = minimize(
        lambda u: H * u @ u, np.zeros(K), jac=lambda u: 2 * H * u,
        constraints=constraints, bounds=[(lower, upper)] * K, method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )  # fmt: skip
    assert result.success
    return result.x


def solve(params=PARAMS, terminal=at_goal_at_rest, **kwargs):
    return lx.optimize_controls(
        SYSTEM, params, Q0, QD0, t1=T, controls="u", cost=effort,
        terminal=terminal, segments=K, **kwargs,
    )  # fmt: skip


@pytest.fixture(scope="module")
def bounded():
    return solve(bounds={"u": (-2.2, 2.2)})


def test_minimum_energy_matches_the_least_norm_solution():
    """Unbounded: u = A^T (A A^T)^-1 b, the discrete minimum-energy control
    (close to the continuous 6/T^2 (1 - 2t/T) m)."""
    result = solve()
    a = linear_map()
    expected = a.T @ np.linalg.solve(a @ a.T, [1.0, 0.0])
    assert bool(result.converged) and not bool(result.failed)
    np.testing.assert_allclose(result.params["u"], expected, atol=1e-7)
    assert float(result.max_violation) < 1e-8
    assert float(result.cost) == pytest.approx(H * expected @ expected, rel=1e-7)
    # The re-simulated trajectory reaches the goal, and stays on the rail.
    assert float(result.terminal_error) < 1e-8
    assert float(jnp.max(jnp.abs(result.trajectory.phi))) < 1e-9
    np.testing.assert_allclose(result.nodes.q[-1] @ DIRECTION, 1.0, atol=1e-9)
    assert int(result.iterations) <= 20


def test_bounds_hold_and_match_scipy(bounded):
    """An active bound |u| <= 2.2 N (the unbounded optimum starts at 2.6 N;
    bang-bang at 2.2 N would go 1.1 m): the convex QP solved by scipy's SLSQP."""
    expected = scipy_qp(-2.2, 2.2)
    assert bool(bounded.converged)
    np.testing.assert_allclose(bounded.params["u"], expected, atol=1e-6)
    assert float(jnp.max(jnp.abs(bounded.params["u"]))) <= 2.2
    assert float(bounded.max_violation) < 1e-8


def test_path_inequality_matches_scipy():
    """A speed limit v <= 0.6 m/s at the segment boundaries (the unbounded
    optimum reaches 0.73 m/s): g(t, q, qd) = v - 0.6 <= 0."""

    def speed_limit(t, q, qd, p):
        return jnp.stack([qd @ DIRECTION - 0.6])

    result = solve(path=speed_limit)
    expected = scipy_qp(speed_limit=0.6)
    assert bool(result.converged)
    np.testing.assert_allclose(result.params["u"], expected, atol=1e-6)
    assert float(jnp.max(result.nodes.qd @ DIRECTION)) <= 0.6 + 1e-8


def test_vmap_over_problems_equals_one_at_a_time(bounded):
    """Three goals and masses in one vmapped call: each the same as alone (the
    first is the module's bounded problem)."""
    goals, masses = jnp.array([1.0, 0.5, 0.8]), jnp.array([2.0, 1.0, 2.5])

    def one(goal, mass):
        return solve({**PARAMS, "goal": goal, "mass": mass}, bounds={"u": (-2.2, 2.2)})

    batch = jax.vmap(one)(goals, masses)
    assert np.all(np.asarray(batch.converged))
    np.testing.assert_allclose(batch.params["u"][0], bounded.params["u"], atol=1e-9)
    for i in (1, 2):
        expected = scipy_qp(-2.2, 2.2, goal=float(goals[i]), mass=float(masses[i]))
        np.testing.assert_allclose(batch.params["u"][i], expected, atol=1e-6)


def test_a_failed_condensed_solve_is_solved_again_whole():
    """Out of reach (1 m in 2 s with |u| <= 2 N on 2.5 kg: bang-bang covers
    0.8 m): the condensed Newton steps fail, and the default solves again with
    the whole KKT matrix, saying so; that fails too, and is reported, not
    claimed. With condense=True nothing is solved again."""
    params = {**PARAMS, "mass": 2.5}
    with pytest.warns(UserWarning, match="condense=False"):
        result = solve(params, bounds={"u": (-2.0, 2.0)})
    assert bool(result.failed) and not bool(result.converged)
    assert float(result.max_violation) > 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        once = solve(params, bounds={"u": (-2.0, 2.0)}, condense=True)
    assert bool(once.failed)


def test_a_transcription_too_coarse_for_the_motion_is_flagged():
    """One explicit Euler step per segment, arriving at 1 m/s: Euler's position
    falls short of the exact motion by h/2 per unit of speed gained (0.125 m
    here), so the force that is optimal for the transcription, simulated with
    adaptive steps, overshoots the goal by that much; the result says so, and a
    warning names the remedy."""

    def arriving(q, qd, p):
        return jnp.stack([q @ DIRECTION - p["goal"], qd @ DIRECTION - 1.0])

    with pytest.warns(UserWarning, match="raise steps_per_segment"):
        result = solve(terminal=arriving, solver=dfx.Euler(), steps_per_segment=1)
    assert bool(result.converged)
    assert float(result.max_violation) < 1e-8  # the transcription is satisfied
    assert float(result.terminal_error) == pytest.approx(H / 2, rel=1e-3)


def test_terminal_conditions_dependent_on_the_constraints():
    """Terminal conditions that repeat what the rail already holds (x - 2 y = 0
    and its velocity form): the KKT matrix is singular in those rows, and the
    interior point's constraint regularization must still find the least-norm
    control."""

    def redundant(q, qd, p):
        return jnp.concatenate(
            [at_goal_at_rest(q, qd, p), rail(0.0, q, p), rail(0.0, qd, p)]
        )

    result = lx.optimize_controls(
        SYSTEM, PARAMS, Q0, QD0, t1=T, controls="u", cost=effort,
        terminal=redundant, segments=K,
    )  # fmt: skip
    a = linear_map()
    expected = a.T @ np.linalg.solve(a @ a.T, [1.0, 0.0])
    assert bool(result.converged) and not bool(result.failed)
    np.testing.assert_allclose(result.params["u"], expected, atol=1e-7)


LINEAR = lx.PiecewiseLinear(0.0, T, num_knots=K + 1)


def test_piecewise_linear_control_matches_its_exact_optimum():
    """The force linear between K + 1 knots at the segment boundaries: the motion
    is cubic on each segment (integrated exactly), the end state linear in the
    knot values through the integrals of the hat functions, and the exact
    effort integral of u^2 a quadratic form (the hats' mass matrix W). The
    optimum u = W^-1 A^T (A W^-1 A^T)^-1 b, computed here by hand."""
    mass = PARAMS["mass"]

    def push_linear(t, q, qd, p):
        return LINEAR(t, p["u"]) * jnp.asarray(DIRECTION)

    t_j = H * np.arange(K + 1)
    weights = np.full(K + 1, H)
    weights[[0, -1]] = H / 2
    moments = (T - t_j) * H  # int (T - t) hat_j dt, a symmetric hat
    moments[0], moments[-1] = T * H / 2 - H**2 / 6, H**2 / 6
    a = np.stack([moments, weights]) / mass
    w = np.diag(np.full(K + 1, 4 * H / 6))
    w[[0, -1], [0, -1]] = 2 * H / 6
    w += np.diag(np.full(K, H / 6), 1) + np.diag(np.full(K, H / 6), -1)
    w_inv_at = np.linalg.solve(w, a.T)
    expected = w_inv_at @ np.linalg.solve(a @ w_inv_at, [1.0, 0.0])

    result = lx.optimize_controls(
        lx.System(lagrangian, rail, push_linear), {**PARAMS, "u": jnp.zeros(K + 1)},
        Q0, QD0, t1=T, controls="u", cost=lambda nodes, p: p["u"] @ w @ p["u"],
        terminal=at_goal_at_rest, segments=K,
    )  # fmt: skip
    assert bool(result.converged) and not bool(result.failed)
    np.testing.assert_allclose(result.params["u"], expected, atol=1e-7)
    assert float(result.terminal_error) < 1e-8


def test_piecewise_constant_holds_each_value_on_its_interval():
    control = lx.PiecewiseConstant(1.0, 3.0, num_knots=4)
    values = jnp.array([1.0, 2.0, 3.0, 4.0])
    edges = control.boundaries
    np.testing.assert_allclose(edges, [1.0, 1.5, 2.0, 2.5, 3.0])
    np.testing.assert_allclose(control.knots, [1.0, 1.5, 2.0, 2.5])
    np.testing.assert_allclose(control(edges, values), [1, 2, 3, 4, 4])
    before = jnp.nextafter(edges[1:-1], -jnp.inf)
    np.testing.assert_allclose(control(before, values), [1, 2, 3])
    np.testing.assert_allclose(control(jnp.array([0.0, 9.0]), values), [1, 4])


def test_errors_name_the_argument():
    with pytest.raises(KeyError, match="controls='force'"):
        lx.optimize_controls(SYSTEM, PARAMS, Q0, QD0, t1=T, controls="force")
    with pytest.raises(ValueError, match="do not act on the system"):
        spare = {**PARAMS, "spare": jnp.zeros(K)}
        lx.optimize_controls(SYSTEM, spare, Q0, QD0, t1=T, controls="spare")
    with pytest.raises(KeyError, match="bounds has the key 'v'"):
        lx.optimize_controls(SYSTEM, PARAMS, Q0, QD0, t1=T, bounds={"v": (0, 1)})
    with pytest.raises(ValueError, match="states_guess must be"):
        lx.optimize_controls(
            SYSTEM, PARAMS, Q0, QD0, t1=T, states_guess=(jnp.zeros((3, 2)),) * 2
        )


def test_segment_derivatives_equal_autodiff_of_the_whole_problem():
    """The solver's Jacobian and Lagrangian Hessian, assembled from per-segment
    blocks (forward mode; forward over reverse), and the structured products
    of the condensed Newton step, equal jax.jacfwd and
    jax.hessian of the whole transcribed problem: a pendulum in Cartesian
    coordinates (nonlinear, projected segment ends), a piecewise-linear control
    (windows shared by neighbouring segments), a path constraint and terminal
    conditions, at a random point and random multipliers."""
    from lagrax.optimize._control import _Chain, _transcribe

    kk = 3
    control = lx.PiecewiseLinear(0.0, 1.0, num_knots=kk + 1)

    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd - 9.81 * q[1]

    def rod(t, q, p):
        return jnp.stack([q @ q - 1.0])

    def torque(t, q, qd, p):
        return control(t, p["u"]) * jnp.stack([-q[1], q[0]])

    params = {"u": jnp.zeros(kk + 1)}
    problem = _transcribe(
        lx.System(lagrangian, rod, torque), params, ("u",), jnp.array([0.0, -1.0]),
        jnp.zeros(2), 0.0, 1.0, kk, lambda nodes, p: jnp.sum(p["u"] ** 2),
        lambda q, qd, p: jnp.stack([q[0], qd[0]]),
        lambda t, q, qd, p: jnp.stack([qd @ qd - 4.0]), None, 1, None, None, None,
    )  # fmt: skip
    keys = jax.random.split(jax.random.key(0), 3)
    x = 0.3 * jax.random.normal(keys[0], (problem.size,))
    m = jax.eval_shape(problem.constraints, x, params).shape[0]
    lam = jax.random.normal(keys[1], (m,))
    v = jax.random.normal(keys[2], (problem.size, 4))
    e = problem.num_nodes
    chain = _Chain(e, 2 * problem.n)

    @jax.jit  # one compilation for every quantity compared
    def compare(x, lam, v):
        jac, hess = problem.jacobian(x, params), problem.hessian(x, lam, params)
        expected = jax.hessian(
            lambda x: (
                problem.objective(x, params) + lam @ problem.constraints(x, params)
            )
        )(x)
        pairs = [
            (jac, jax.jacfwd(problem.constraints)(x, params)),
            (hess.dense(), expected),
            # The products the condensed Newton step uses, and the recursion
            # for Jy^-1 (Jy^-T), against their dense counterparts.
            (jax.vmap(hess.mv, 1, 1)(v), expected @ v),
            (hess.sandwich(v), v.T @ expected @ v),
        ]
        for transpose in (False, True):
            dense = jax.scipy.linalg.solve_triangular(
                jac[:e, :e], v[:e], lower=True, unit_diagonal=True,
                trans=int(transpose),
            )  # fmt: skip
            pairs.append((chain.solve(jac, v[:e], transpose), dense))
            pairs.append((chain.solve(jac, v[:e, 0], transpose), dense[:, 0]))
        return pairs

    for got, want in compare(x, lam, v):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_cart_pole_in_minimal_coordinates_recovers_by_restoration():
    """The cart-pole swing-up of examples/swing_up.py written in (x, theta), the
    model CasADi solves in benchmarks/optimal_control.py, with a 0.16905 kg pole:
    at iteration 13 the Newton step is huge (the fraction to the boundary cuts
    it to 3e-3) and backtracking fails along it and along the Newton step of
    c = 0 alone; the least-norm feasibility step recovers. The optimal forces,
    simulated by scipy in the same coordinates, end upright at rest."""
    from scipy.integrate import solve_ivp

    kk, horizon, l, g, big_m = 50, 2.0, 0.5, 9.81, 1.0
    m = float(np.linspace(0.05, 0.2, 64)[50])  # 0.16905 kg
    control = lx.PiecewiseConstant(0.0, horizon, num_knots=kk)

    def lagrangian(t, q, qd, p):
        th, (xd, thd) = q[1], qd
        kinetic = 0.5 * (big_m + m) * xd**2 + m * l * xd * thd * jnp.cos(th)
        return kinetic + 0.5 * m * l**2 * thd**2 + m * g * l * jnp.cos(th)

    def forces(t, q, qd, p):
        return jnp.stack([control(t, p["u"]), 0.0])

    theta = np.linspace(0.0, np.pi, kk + 1)
    rate = np.full(kk + 1, np.pi / horizon)
    rate[[0, -1]] = 0.0
    result = lx.optimize_controls(
        lx.System(lagrangian, forces=forces), {"u": jnp.zeros(kk)}, jnp.zeros(2),
        jnp.zeros(2), t1=horizon,
        cost=lambda nodes, p: horizon / kk * jnp.sum(p["u"] ** 2),
        terminal=lambda q, qd, p: jnp.stack([q[1] - jnp.pi, qd[0], qd[1]]),
        bounds={"u": (-10.0, 10.0)}, segments=kk,
        states_guess=(np.stack([0 * theta, theta], 1), np.stack([0 * theta, rate], 1)),
    )  # fmt: skip
    assert bool(result.converged) and not bool(result.failed)
    assert float(result.max_violation) < 1e-8
    u = np.asarray(result.params["u"])
    assert np.all(np.abs(u) <= 10.0 + 1e-9)

    def rhs(t, y, force):
        _, th, xd, thd = y
        s, c = np.sin(th), np.cos(th)
        mass = np.array([[big_m + m, m * l * c], [m * l * c, m * l**2]])
        acc = np.linalg.solve(mass, [force + m * l * s * thd**2, -m * g * l * s])
        return [xd, thd, *acc]

    state = np.zeros(4)
    edges = np.linspace(0.0, horizon, kk + 1)
    for k in range(kk):
        state = solve_ivp(rhs, edges[k : k + 2], state, args=(u[k],),
                          method="DOP853", rtol=1e-11, atol=1e-11).y[:, -1]  # fmt: skip
    np.testing.assert_allclose(state[1:], [np.pi, 0.0, 0.0], atol=1e-5)
