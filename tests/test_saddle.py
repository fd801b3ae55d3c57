"""Saddle-point solvers against numpy, each other, and on redundant constraints."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


SOLVERS = {
    "schur": lx.SchurCholesky(),
    "lu": lx.DenseLU(),
    "lstsq": lx.LeastSquares(),
    "al": lx.AugmentedLagrangian(),
}


def random_problem(seed, n=6, m=3):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    mass = a @ a.T + n * np.eye(n)
    jac = rng.normal(size=(m, n))
    return mass, jac, rng.normal(size=n), rng.normal(size=m)


def numpy_kkt(mass, jac, force, rhs):
    n, m = mass.shape[0], jac.shape[0]
    kkt = np.block([[mass, -jac.T], [jac, np.zeros((m, m))]])
    sol = np.linalg.solve(kkt, np.concatenate([force, rhs]))
    return sol[:n], sol[n:]


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_numpy_kkt(name, seed):
    mass, jac, force, rhs = random_problem(seed)
    sol = jax.jit(SOLVERS[name].solve)(mass, jac, force, rhs)
    qdd, lam = numpy_kkt(mass, jac, force, rhs)
    np.testing.assert_allclose(sol.qdd, qdd, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sol.lam, lam, rtol=1e-10, atol=1e-12)
    assert sol.result == lx.RESULTS.successful


@pytest.mark.parametrize("name", SOLVERS)
def test_unconstrained(name):
    mass, _, force, _ = random_problem(3)
    sol = SOLVERS[name].solve(mass, jnp.zeros((0, 6)), force, jnp.zeros(0))
    np.testing.assert_allclose(sol.qdd, np.linalg.solve(mass, force), rtol=1e-12)
    assert sol.lam.shape == (0,)


def test_solvers_agree_under_vmap():
    problems = [random_problem(seed) for seed in range(8)]
    batch = [jnp.stack(x) for x in zip(*problems, strict=True)]
    results = {
        name: jax.jit(jax.vmap(solver.solve))(*batch)
        for name, solver in SOLVERS.items()
    }
    for name in ("lu", "lstsq", "al"):
        np.testing.assert_allclose(results[name].qdd, results["schur"].qdd, rtol=1e-10)
        np.testing.assert_allclose(results[name].lam, results["schur"].lam, rtol=1e-10)


def redundant_problem():
    """The second constraint row repeated (scaled): the rank is 2 of 3."""
    mass, jac, force, _ = random_problem(4)
    jac = np.concatenate([jac[:2], 2.0 * jac[1:2]])
    rhs = np.array([0.3, -0.2, -0.4])  # consistent: row 3 = 2 x row 2
    return mass, jac, force, rhs


def test_schur_cholesky_flags_redundant_constraints():
    sol = lx.SchurCholesky().solve(*redundant_problem())
    assert sol.result == lx.RESULTS.redundant_constraints
    assert "redundant" in lx.RESULTS[sol.result]


def test_dense_lu_flags_singular_kkt():
    sol = lx.DenseLU().solve(*redundant_problem())
    assert sol.result == lx.RESULTS.singular_saddle_matrix
    assert "redundant" in lx.RESULTS[sol.result]


def test_least_squares_gives_minimal_norm_multipliers():
    mass, jac, force, rhs = redundant_problem()
    sol = lx.LeastSquares().solve(mass, jac, force, rhs)
    assert sol.result == lx.RESULTS.successful
    # The accelerations are those of the two independent constraints.
    qdd, lam2 = numpy_kkt(mass, jac[:2], force, rhs[:2])
    np.testing.assert_allclose(sol.qdd, qdd, rtol=1e-10)
    # Of all lam with J^T lam = J2^T lam2, the least-norm one: row 2 and row 3
    # (= 2 x row 2) share lam2[1] in the ratio 1 : 2.
    expected = np.array([lam2[0], lam2[1] / 5, 2 * lam2[1] / 5])
    np.testing.assert_allclose(sol.lam, expected, rtol=1e-9)
    np.testing.assert_allclose(jac.T @ sol.lam, jac[:2].T @ lam2, rtol=1e-9)


def test_not_positive_definite_mass_is_flagged():
    mass, jac, force, rhs = random_problem(5)
    mass = mass - 100 * np.eye(6)
    sol = lx.SchurCholesky().solve(mass, jac, force, rhs)
    assert sol.result == lx.RESULTS.mass_matrix_not_positive_definite


def redundant_pendulum():
    """A pendulum whose rod constraint is given twice (a modelling slip)."""
    model = lx.systems.pendulum()

    def twice(t, q, p):
        phi = q @ q - p["l"] ** 2
        return jnp.stack([phi, phi])

    return model, lx.System(model.system.lagrangian, twice)


def test_redundant_constraints_raise_with_the_default_solver():
    model, system = redundant_pendulum()
    q0 = jnp.array([1.5, -2.0])
    with pytest.raises(Exception, match="redundant"):
        lx.accelerations(system, 0.0, q0, jnp.zeros(2), model.params)
    with pytest.raises(Exception, match="redundant"):
        lx.simulate(system, q0, jnp.zeros(2), model.params, t1=1.0)


def test_redundant_constraints_without_throw_report_the_cause():
    model, system = redundant_pendulum()
    sol = lx.simulate(
        system,
        jnp.array([1.5, -2.0]),
        jnp.zeros(2),
        model.params,
        t1=1.0,
        stabilization=lx.NoStabilization(),
        max_steps=16,
        throw=False,
    )
    assert sol.result == lx.RESULTS.redundant_constraints


def test_least_squares_simulates_redundant_constraints():
    model, system = redundant_pendulum()
    q0 = jnp.array([1.5, -2.0])
    kw = dict(t1=2.0, ts=jnp.linspace(0.0, 2.0, 5), rtol=1e-10, atol=1e-10)
    minimal = lx.simulate(model.system, q0, jnp.zeros(2), model.params, **kw)
    doubled = lx.simulate(
        system, q0, jnp.zeros(2), model.params, saddle_solver=lx.LeastSquares(), **kw
    )
    np.testing.assert_allclose(doubled.q, minimal.q, atol=1e-9)
    # The rod force is shared equally by the two identical rows.
    half = np.asarray(minimal.multipliers) / 2
    np.testing.assert_allclose(doubled.multipliers, np.hstack([half, half]), atol=1e-8)


def four_bar(redundant):
    """A planar four-bar in absolute link angles (crank, coupler, rocker), uniform
    rods under gravity. The loop closes with two equations; `redundant` adds a
    third, a combination of the two (the dependent closure equation)."""
    a, b, c, d, g = 1.0, 2.5, 2.0, 3.0, 9.81
    m1, m2, m3 = 1.0, 2.0, 1.5

    def lagrangian(t, q, qd, p):
        s, co = jnp.sin(q), jnp.cos(q)
        vx = -a * s[0] * qd[0] - 0.5 * b * s[1] * qd[1]
        vy = a * co[0] * qd[0] + 0.5 * b * co[1] * qd[1]
        rods = m1 * a**2 / 6 * qd[0] ** 2 + m3 * c**2 / 6 * qd[2] ** 2
        kinetic = rods + 0.5 * m2 * (vx**2 + vy**2) + m2 * b**2 / 24 * qd[1] ** 2
        potential = g * (m1 * a / 2 * s[0] + m2 * (a * s[0] + b / 2 * s[1])
                         + m3 * c / 2 * s[2])  # fmt: skip
        return kinetic - potential

    def constraints(t, q, p):
        cx = a * jnp.cos(q[0]) + b * jnp.cos(q[1]) - c * jnp.cos(q[2]) - d
        cy = a * jnp.sin(q[0]) + b * jnp.sin(q[1]) - c * jnp.sin(q[2])
        rows = [cx, cy]
        if redundant:
            rows.append(0.6 * cx + 0.8 * cy)
        return jnp.stack(rows)

    return lx.System(lagrangian, constraints)


def test_least_squares_four_bar_with_a_dependent_closure_equation():
    minimal, redundant = four_bar(False), four_bar(True)
    q0, qd0 = lx.consistent_state(minimal, jnp.array([1.2, 0.3, 1.4]),
                                  jnp.array([2.0, 0.0, 0.0]), {}, fixed_q=[0],
                                  fixed_qd=[0])  # fmt: skip
    ts = jnp.linspace(0.0, 2.0, 21)
    kw = dict(t1=2.0, ts=ts, rtol=1e-10, atol=1e-10)
    reference = lx.simulate(minimal, q0, qd0, {}, **kw)
    # The default solver refuses the dependent equation (that simulate raises
    # then is checked on the pendulum above, at a fraction of the compile).
    with pytest.raises(Exception, match="redundant"):
        lx.accelerations(redundant, 0.0, q0, qd0, {})
    sol = lx.simulate(redundant, q0, qd0, {}, saddle_solver=lx.LeastSquares(), **kw)
    np.testing.assert_allclose(sol.q, reference.q, atol=1e-8)
    np.testing.assert_allclose(sol.qd, reference.qd, atol=1e-7)
    # The same constraint forces J^T lam, shared by the multipliers of least norm:
    # orthogonal to (0.6, 0.8, -1), the null space of J^T.
    lam_min, lam = reference.multipliers, sol.multipliers
    np.testing.assert_allclose(lam @ jnp.array([0.6, 0.8, -1.0]), 0.0, atol=1e-8)
    combined = lam[:, :2] + lam[:, 2:] * jnp.array([0.6, 0.8])
    np.testing.assert_allclose(combined, lam_min, rtol=1e-7, atol=1e-7)
    # And the motion conserves energy: nothing is lost to the redundancy.
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-8)
