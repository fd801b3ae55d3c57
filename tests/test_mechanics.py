"""The autodiff terms against closed forms; J qdd = -gamma; the sign convention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


def test_terms_of_a_rheonomic_system_in_closed_form():
    """Mass m(t) on a circle of radius r(t): every term is known by hand."""

    def lagrangian(t, q, qd, p):
        mass = p["m0"] * (1 + 0.5 * jnp.sin(t))
        return 0.5 * mass * qd @ qd - mass * p["g"] * q[1]

    def constraints(t, q, p):
        radius = p["r0"] + p["a"] * jnp.sin(p["w"] * t)
        return jnp.stack([q @ q - radius**2])

    p = {"m0": 2.0, "g": 9.81, "r0": 1.5, "a": 0.2, "w": 3.0}
    t, q, qd = 0.7, jnp.array([0.9, -1.1]), jnp.array([0.4, 1.3])
    system = lx.System(lagrangian, constraints)
    # Under jit: one program, rather than every autodiff operation compiled alone.
    terms = jax.jit(lambda *args: lx.mechanics(system, *args))(t, q, qd, p)

    mass = p["m0"] * (1 + 0.5 * np.sin(t))
    mass_dot = p["m0"] * 0.5 * np.cos(t)
    np.testing.assert_allclose(terms.mass, mass * np.eye(2), rtol=1e-14)
    # d/dt (m qd) = m qdd + m' qd: the bias of a time-dependent Lagrangian.
    np.testing.assert_allclose(
        terms.force, [-mass_dot * qd[0], -mass * p["g"] - mass_dot * qd[1]], rtol=1e-14
    )
    radius = p["r0"] + p["a"] * np.sin(p["w"] * t)
    r_dot = p["a"] * p["w"] * np.cos(p["w"] * t)
    r_ddot = -p["a"] * p["w"] ** 2 * np.sin(p["w"] * t)
    np.testing.assert_allclose(terms.jac, [2 * q], rtol=1e-14)
    np.testing.assert_allclose(terms.phi, [q @ q - radius**2], rtol=1e-14)
    np.testing.assert_allclose(terms.phi_dot, [2 * q @ qd - 2 * radius * r_dot])
    # gamma = d2/dt2 phi at qdd = 0: 2 |qd|^2 - (r^2)''.
    np.testing.assert_allclose(
        terms.gamma, [2 * qd @ qd - 2 * (r_dot**2 + radius * r_ddot)], rtol=1e-13
    )


def test_bias_of_a_configuration_dependent_mass_matrix():
    """Polar coordinates: L = (r'^2 + r^2 th'^2)/2, so f = (r th'^2, -2 r r' th')."""

    def lagrangian(t, q, qd, p):
        return 0.5 * (qd[0] ** 2 + q[0] ** 2 * qd[1] ** 2)

    q, qd = jnp.array([1.7, 0.3]), jnp.array([0.5, -2.0])
    terms = lx.mechanics(lx.System(lagrangian), 0.0, q, qd, None)
    np.testing.assert_allclose(terms.mass, np.diag([1.0, 1.7**2]), rtol=1e-14)
    np.testing.assert_allclose(
        terms.force, [1.7 * 4.0, -2 * 1.7 * 0.5 * -2.0], rtol=1e-14
    )
    assert terms.jac.shape == (0, 2) and terms.gamma.shape == (0,)


# Bricard's 35 coordinates cost 18 s to compile here; its shipped config runs
# in test_cli and its accelerations are checked in test_singular (slow).
MODELS = [f() for name, f in lx.systems.BUILTIN.items() if name != "bricard"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_accelerations_satisfy_the_constraints(model):
    rng = np.random.default_rng(0)
    q0, _ = model.initial_state()

    # One compiled program for the three states: evaluated eagerly, the
    # autodiff terms would compile hundreds of small operations one by one.
    reference = lx.SchurCholesky()

    @jax.jit
    def solve(q, qd):
        qdd, lam = lx.accelerations(
            model.system, 0.0, q, qd, model.params, saddle_solver=reference
        )
        al = lx.AugmentedLagrangian()
        augmented = lx.accelerations(
            model.system, 0.0, q, qd, model.params, saddle_solver=al
        )
        terms = lx.mechanics(model.system, 0.0, q, qd, model.params)
        if model.system.velocity_constraints is not None:
            return qdd, lam, terms, augmented, augmented
        limit = lx.accelerations(
            model.system, 0.0, q, qd, model.params, saddle_solver=lx.SingularLimit()
        )
        return qdd, lam, terms, augmented, limit

    for _ in range(3):
        # Off the manifold too: J qdd = -gamma holds at any state.
        q = np.asarray(q0) + 0.1 * rng.normal(size=q0.shape)
        qd = rng.normal(size=q0.shape)
        qdd, lam, terms, *others = solve(q, qd)
        # The augmented Lagrangian solver and SingularLimit give the same (away
        # from singular configurations, which random states are not).
        for qdd_other, lam_other in others:
            size = 1 + float(jnp.max(jnp.abs(qdd)))
            np.testing.assert_allclose(qdd_other, qdd, atol=1e-11 * size, rtol=0)
            size = 1 + float(jnp.max(jnp.abs(lam), initial=0))
            np.testing.assert_allclose(lam_other, lam, atol=1e-10 * size, rtol=0)
        np.testing.assert_allclose(terms.jac @ qdd, -terms.gamma, atol=1e-12)
        # The sign convention: M qdd = f + J^T lam.
        np.testing.assert_allclose(
            terms.mass @ qdd, terms.force + terms.jac.T @ lam, atol=1e-12
        )


def test_baumgarte_correction():
    model = lx.systems.pendulum()
    q, qd = jnp.array([1.0, -2.4]), jnp.array([0.3, 0.5])  # off the circle
    stab = lx.Baumgarte(2.0, 3.0)
    qdd, _ = lx.accelerations(model.system, 0.0, q, qd, model.params, stab)
    terms = lx.mechanics(model.system, 0.0, q, qd, model.params)
    expected = -terms.gamma - 2 * 2.0 * terms.phi_dot - 3.0**2 * terms.phi
    np.testing.assert_allclose(terms.jac @ qdd, expected, atol=1e-12)


def test_energy_is_the_jacobi_integral():
    model = lx.systems.pendulum()
    q, qd = jnp.array([1.0, -2.0]), jnp.array([0.3, 0.5])
    p = model.params
    expected = 0.5 * p["m"] * (0.3**2 + 0.5**2) + p["m"] * p["g"] * -2.0
    assert float(lx.energy(model.system, 0.0, q, qd, p)) == pytest.approx(expected)


def test_saddle_solvers_agree_on_the_builtin_systems():
    model = lx.systems.slider_pendulum()
    q, qd = model.initial_state()
    qd = qd.at[0].set(0.3)
    results = [
        lx.accelerations(model.system, 0.0, q, qd, model.params, saddle_solver=s)
        for s in (lx.SchurCholesky(), lx.DenseLU(), lx.LeastSquares())
    ]
    for qdd, lam in results[1:]:
        np.testing.assert_allclose(qdd, results[0][0], atol=1e-12)
        np.testing.assert_allclose(lam, results[0][1], atol=1e-12)
