"""Singular configurations, redundant constraints and singular mass matrices:
`lx.AugmentedLagrangian` and `lx.SingularLimit` against independent answers
(exact motions, minimal coordinates, the default solver where it applies)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax.systems.n_four_bar import exact_motion, state_at

from .test_saddle import four_bar, numpy_kkt, redundant_problem


AL = lx.AugmentedLagrangian()


def test_augmented_lagrangian_redundant_rows_give_least_norm_multipliers():
    mass, jac, force, rhs = redundant_problem()
    sol = AL.solve(mass, jac, force, rhs)
    assert sol.result == lx.RESULTS.successful
    qdd, lam2 = numpy_kkt(mass, jac[:2], force, rhs[:2])
    np.testing.assert_allclose(sol.qdd, qdd, rtol=1e-10)
    expected = np.array([lam2[0], lam2[1] / 5, 2 * lam2[1] / 5])
    np.testing.assert_allclose(sol.lam, expected, rtol=1e-9)


def test_augmented_lagrangian_singular_mass_matrix():
    """A point pendulum with a third, massless coordinate z tied to x (z = x):
    M = diag(m, m, 0) is singular but positive definite where the constraints
    allow motion. The x, y motion is the pendulum's, checked against the angle
    equation th'' = -(g / l) sin th solved by scipy."""
    from .helpers import solve_reference

    g, length = 9.81, 1.3

    def lagrangian(t, q, qd, p):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2) - g * q[1]

    def constraints(t, q, p):
        return jnp.stack([q[0] ** 2 + q[1] ** 2 - length**2, q[2] - q[0]])

    system = lx.System(lagrangian, constraints)
    th0 = 0.8
    q0 = jnp.array([length * np.sin(th0), -length * np.cos(th0), length * np.sin(th0)])
    assert lx.accelerations(system, 0.0, q0, jnp.zeros(3), {}, throw=False)[0].shape
    with pytest.raises(Exception, match="not positive definite"):
        lx.accelerations(system, 0.0, q0, jnp.zeros(3), {})
    ts = jnp.linspace(0.0, 3.0, 31)
    sol = lx.simulate(system, q0, jnp.zeros(3), {}, t1=3.0, ts=ts, saddle_solver=AL,
                      rtol=1e-10, atol=1e-10)  # fmt: skip
    ref = solve_reference(
        lambda t, s: [s[1], -(g / length) * np.sin(s[0])], [th0, 0.0], np.asarray(ts)
    )
    th = np.arctan2(np.asarray(sol.q[:, 0]), -np.asarray(sol.q[:, 1]))
    np.testing.assert_allclose(th, ref[:, 0], atol=1e-8)
    np.testing.assert_allclose(sol.q[:, 2], sol.q[:, 0], atol=1e-12)


def test_augmented_lagrangian_four_bar_with_a_dependent_closure_equation():
    minimal, redundant = four_bar(False), four_bar(True)
    q0, qd0 = lx.consistent_state(minimal, jnp.array([1.2, 0.3, 1.4]),
                                  jnp.array([2.0, 0.0, 0.0]), {}, fixed_q=[0],
                                  fixed_qd=[0])  # fmt: skip
    # The accelerations of the minimal model, at the start and along a
    # perturbed state (the redundancy holds everywhere: 0.6 cx + 0.8 cy).
    for dq in (0.0, 0.05):
        q = q0 + dq
        ref, _ = lx.accelerations(minimal, 0.0, q, qd0, {})
        qdd, lam = lx.accelerations(redundant, 0.0, q, qd0, {}, saddle_solver=AL)
        np.testing.assert_allclose(qdd, ref, rtol=1e-10, atol=1e-10)
        # Least norm: orthogonal to (0.6, 0.8, -1), the null space of J^T, up to
        # the round-off of gamma's rows amplified by the penalty (1e9 eps).
        null = float(lam @ jnp.array([0.6, 0.8, -1.0]))
        assert abs(null) < 1e-6 * float(jnp.linalg.norm(lam))


def test_point_passes_the_crossing_of_two_lines_on_its_own():
    """phi = x y: the x and y axes, which cross at the origin, where J = (y, x)
    vanishes (a singular configuration). A point moving along the x axis at 1 m/s,
    pulled by gravity along -y, passes the crossing and stays on the x axis (the
    constraint force y holds it, finite in the limit), exactly: x = x0 + t. Started
    before the crossing and on it."""
    system = lx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd - 9.81 * q[1],
        constraints=lambda t, q, p: jnp.atleast_1d(q[0] * q[1]),
    )
    ts = jnp.linspace(0.0, 2.0, 41)
    for x0 in (-1.0, 0.0):
        sol = lx.simulate(system, jnp.array([x0, 0.0]), jnp.array([1.0, 0.0]), {},
                          t1=2.0, ts=ts, saddle_solver=AL, rtol=1e-10,
                          atol=1e-10)  # fmt: skip
        np.testing.assert_allclose(sol.q[:, 0], x0 + ts, atol=1e-10)
        np.testing.assert_allclose(sol.q[:, 1], 0.0, atol=1e-10)


@pytest.fixture(scope="module")
def n_four_bar():
    model = lx.systems.n_four_bar(2)
    q0, qd0 = model.initial_state()
    ts = jnp.linspace(0.0, 10.0, 201)
    theta, energy = exact_motion(2, model.params, np.asarray(ts))

    def run(solver, rtol):
        sol = lx.simulate(model.system, q0, qd0, model.params, t1=10.0, ts=ts,
                          saddle_solver=solver, rtol=rtol, atol=rtol, throw=False,
                          max_steps=20_000)  # fmt: skip
        angle = float(np.max(np.abs(np.asarray(sol.q[:, 2]) - theta)))
        drift = float(np.max(np.abs(np.asarray(sol.energy) - energy[0])))
        return sol, angle, drift / abs(energy[0])

    return model, run


def test_n_four_bar_through_its_singular_configurations(n_four_bar):
    """IFToMM A02 (two loops, 10 s from the flat, singular start, the cranks at
    1 rad/s: eight passes through a singular configuration) against the exact
    motion of its parallelogram branch, at three tolerances: the errors fall with
    the tolerance, to <= 1e-6 in angle and relative energy at 1e-10."""
    model, run = n_four_bar
    errors = []
    for rtol in (1e-6, 1e-8, 1e-10):
        sol, angle, energy = run(AL, rtol)
        assert sol.result == lx.RESULTS.successful
        errors.append((angle, energy))
    assert errors[2][0] <= 1e-6 and errors[2][1] <= 1e-6, errors
    for (a1, e1), (a2, e2) in zip(errors, errors[1:], strict=False):
        assert a2 < a1 / 10 and e2 < e1 / 10, errors
    # All the cranks turn together and every coupler keeps its angle 0.
    q = np.asarray(sol.q)
    np.testing.assert_allclose(q[:, [5, 8]], q[:, [2, 2]], atol=1e-8)
    np.testing.assert_allclose(q[:, [11, 14]], 0.0, atol=1e-8)


def test_n_four_bar_default_solver_stops_at_the_singular_start(n_four_bar):
    model, _ = n_four_bar
    q0, qd0 = model.initial_state()
    with pytest.raises(Exception, match="redundant|singular"):
        lx.accelerations(model.system, 0.0, q0, qd0, model.params)


@pytest.mark.slow
def test_n_four_bar_least_squares_gets_worse_as_the_tolerance_tightens(n_four_bar):
    """Why the docs send singular mechanisms to AugmentedLagrangian: least squares
    (minimum-norm accelerations where J loses rank) leaves the exact motion more
    at rtol 1e-10 than at 1e-8, far beyond the augmented Lagrangian's error."""
    _, run = n_four_bar
    _, coarse, _ = run(lx.LeastSquares(), 1e-8)
    _, tight, _ = run(lx.LeastSquares(), 1e-10)
    assert tight > coarse and tight > 1e-4


@pytest.mark.slow  # 45 s; the shipped config runs it in the fast suite (test_cli)
def test_bricard_linkage_moves_and_keeps_its_energy():
    """Bricard's orthogonal 6R loop from parts (five slender bars, six hinges):
    35 rows for 35 coordinates, yet one degree of freedom (one row redundant all
    along the motion) and a singular mass matrix. The default solver refuses it;
    the augmented Lagrangian solver moves it through 10 s with the energy kept to
    1e-8 of its value and every constraint to round-off."""
    model = lx.systems.bricard()
    q0, qd0 = model.initial_state()
    jac = jax.jacfwd(lambda q: model.system.constraints(0.0, q, model.params))(q0)
    assert jac.shape == (35, 35) and np.linalg.matrix_rank(np.asarray(jac)) == 34
    with pytest.raises(Exception, match="not positive definite|redundant"):
        lx.accelerations(model.system, 0.0, q0, qd0, model.params)
    ts = jnp.linspace(0.0, 10.0, 101)
    sol = lx.simulate(model.system, q0, qd0, model.params, t1=10.0, ts=ts,
                      saddle_solver=AL, rtol=1e-12, atol=1e-12)  # fmt: skip
    energy = np.asarray(sol.energy)
    assert np.max(np.abs(energy - energy[0])) <= 1e-8 * abs(energy[0])
    assert float(jnp.max(jnp.abs(sol.phi))) < 1e-12
    # It does move: the middle bar's centre travels more than half a metre.
    assert np.max(np.ptp(np.asarray(sol.q[:, 14:17]), axis=0)) > 0.5


def _branch_accelerations(n, params, omega):
    """The exact accelerations of the N-four-bar's parallelogram branch where it
    is flat (theta = 0), from its one-degree-of-freedom equation (the same
    inertia and weight as `exact_motion`): cranks (x, y, th) = (L (i + cos th /
    2), L sin th / 2, th), couplers (L (i + 1/2 + cos th), L sin th, 0)."""
    m, length, g = params["m"], params["L"], params["g"]
    thdd = -m * g * length * ((n + 1) / 2 + n) / (m * length**2 * ((n + 1) / 3 + n))
    cranks = [-length / 2 * omega**2, length / 2 * thdd, thdd] * (n + 1)
    couplers = [-length * omega**2, length * thdd, 0.0] * n
    return np.array(cranks + couplers)


@pytest.mark.parametrize("inner", ["schur", "lu", "least_squares"])
def test_singular_limit_gives_the_physical_accelerations_at_the_instant(inner):
    """At the N-four-bar's flat start J loses N ranks. Wrapped in SingularLimit,
    each solver gives the branch's exact accelerations (the limit along the
    motion); least squares and the augmented Lagrangian alone give the
    minimum-norm ones, off by O(1); the default solver stops."""
    solver = {"schur": lx.SchurCholesky(), "lu": lx.DenseLU(),
              "least_squares": lx.LeastSquares()}[inner]  # fmt: skip
    n = 2
    model = lx.systems.n_four_bar(n)
    q0, qd0 = model.initial_state()
    exact = _branch_accelerations(n, model.params, float(qd0[2]))
    qdd, lam = lx.accelerations(model.system, 0.0, q0, qd0, model.params,
                                saddle_solver=lx.SingularLimit(solver))  # fmt: skip
    np.testing.assert_allclose(qdd, exact, atol=1e-12)
    assert np.all(np.isfinite(np.asarray(lam)))
    if inner == "least_squares":
        for guess in (lx.LeastSquares(), AL):
            qdd, _ = lx.accelerations(model.system, 0.0, q0, qd0, model.params,
                                      saddle_solver=guess)  # fmt: skip
            assert np.max(np.abs(np.asarray(qdd) - exact)) > 0.1


def test_singular_limit_at_the_node_of_a_curve():
    """A point on the nodal cubic y^2 = x^2 (1 + x), started at its node (the
    origin, where J = (-2x - 3x^2, 2y) vanishes) along the branch y = x sqrt(1 +
    x) at 2 m/s, gravity 1 along -y. The branch's own equation gives x'' = -(f'
    f'' x'^2 + g f') / (1 + f'^2) = -2.5 and y'' = f'' x'^2 + f' x'' = 1.5 there
    (f' = f'' = 1 at 0); SingularLimit gives them. The simulation follows the
    branch (scipy in the branch coordinate x) through 1 s."""
    from .helpers import solve_reference

    system = lx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd - q[1],
        constraints=lambda t, q, p: jnp.atleast_1d(q[1] ** 2 - q[0] ** 2 * (1 + q[0])),
    )
    q0, qd0 = jnp.zeros(2), jnp.array([2.0, 2.0])
    qdd, _ = lx.accelerations(system, 0.0, q0, qd0, {},
                              saddle_solver=lx.SingularLimit())  # fmt: skip
    np.testing.assert_allclose(qdd, [-2.5, 1.5], atol=1e-12)

    def branch(t, s):
        x, v = s
        fp = np.sqrt(1 + x) + x / (2 * np.sqrt(1 + x))
        fpp = 1 / np.sqrt(1 + x) - x / (4 * (1 + x) ** 1.5)
        return [v, -(fp * fpp * v**2 + fp) / (1 + fp**2)]

    ts = jnp.linspace(0.0, 1.0, 11)
    sol = lx.simulate(system, q0, qd0, {}, t1=1.0, ts=ts, rtol=1e-10, atol=1e-10,
                      saddle_solver=lx.SingularLimit())  # fmt: skip
    ref = solve_reference(branch, [0.0, 2.0], np.asarray(ts))
    np.testing.assert_allclose(sol.q[:, 0], ref[:, 0], atol=1e-9)


def test_n_four_bar_singular_limit_through_its_singular_configurations(n_four_bar):
    """The N-four-bar with SingularLimit(SchurCholesky()) against the exact
    motion: the errors fall with the tolerance, to <= 1e-6 at rtol 1e-10."""
    _, run = n_four_bar
    errors = []
    for rtol in (1e-6, 1e-8, 1e-10):
        sol, angle, energy = run(lx.SingularLimit(), rtol)
        assert sol.result == lx.RESULTS.successful
        errors.append((angle, energy))
    assert errors[2][0] <= 1e-6 and errors[2][1] <= 1e-6, errors
    for (a1, e1), (a2, e2) in zip(errors, errors[1:], strict=False):
        assert a2 < a1 / 10 and e2 < e1 / 10, errors


def test_singular_limit_equals_the_wrapped_solver_away_from_singularities():
    """Where J has full rank, the rotated rows give the same solution (and
    multipliers back in the original rows), and derivatives flow: the gradient of
    the accelerations at a regular state against central differences."""
    model = lx.systems.n_four_bar(1)
    q, qd = state_at(1, 0.7, 1.3)
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    ref = lx.accelerations(model.system, 0.0, q, qd, model.params)
    got = lx.accelerations(model.system, 0.0, q, qd, model.params,
                           saddle_solver=lx.SingularLimit())  # fmt: skip
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-9, atol=1e-9)

    def crank_acceleration(g):
        params = dict(model.params, g=g)
        return lx.accelerations(model.system, 0.0, q, qd, params,
                                saddle_solver=lx.SingularLimit())[0][2]  # fmt: skip

    grad = jax.grad(crank_acceleration)(9.81)
    h = 1e-4
    fd = (crank_acceleration(9.81 + h) - crank_acceleration(9.81 - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-7)


# Each model compiles two simulations (~5-14 s); the cheapest holonomic and the
# nonholonomic one run in the fast suite.
@pytest.mark.parametrize(
    "name",
    [
        "slider_pendulum",
        "sleigh",
        pytest.param("four_bar", marks=pytest.mark.slow),
        pytest.param("slider_crank", marks=pytest.mark.slow),
        pytest.param("top", marks=pytest.mark.slow),
    ],
)
def test_augmented_lagrangian_trajectories_equal_the_default_solvers(name):
    """Whole simulations of existing models (holonomic, spatial, nonholonomic):
    the augmented Lagrangian solver gives the trajectories of SchurCholesky."""
    model = lx.systems.get(name)
    q0, qd0 = model.initial_state()
    ts = jnp.linspace(0.0, 1.0, 11)

    def run(solver):
        return lx.simulate(model.system, q0, qd0, model.params, t1=1.0, ts=ts,
                           saddle_solver=solver, rtol=1e-10, atol=1e-10)  # fmt: skip

    ref, got = run(lx.SchurCholesky()), run(AL)
    scale = 1 + float(jnp.max(jnp.abs(ref.q)))
    np.testing.assert_allclose(got.q, ref.q, atol=1e-8 * scale, rtol=0)
    np.testing.assert_allclose(got.qd, ref.qd, atol=1e-7 * scale, rtol=0)


def test_singular_limit_with_least_squares_takes_redundant_constraints():
    """A row redundant all along the motion (the four-bar's dependent closure
    equation) is a lost direction whose limit row vanishes too: around
    LeastSquares it gets the minimal-norm treatment, and the accelerations are
    the minimal model's; around SchurCholesky it is refused as redundant."""
    minimal, redundant = four_bar(False), four_bar(True)
    q0, qd0 = lx.consistent_state(minimal, jnp.array([1.2, 0.3, 1.4]),
                                  jnp.array([2.0, 0.0, 0.0]), {}, fixed_q=[0],
                                  fixed_qd=[0])  # fmt: skip
    ref, _ = lx.accelerations(minimal, 0.0, q0, qd0, {})
    solver = lx.SingularLimit(lx.LeastSquares())
    qdd, _ = lx.accelerations(redundant, 0.0, q0, qd0, {}, saddle_solver=solver)
    np.testing.assert_allclose(qdd, ref, rtol=1e-10, atol=1e-10)
    with pytest.raises(Exception, match="redundant"):
        lx.accelerations(redundant, 0.0, q0, qd0, {}, saddle_solver=lx.SingularLimit())
