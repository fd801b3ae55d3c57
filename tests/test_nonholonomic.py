"""Velocity (nonholonomic) constraints against closed-form solutions.

The knife edge (a skate) on an inclined plane (Neimark & Fufaev, *Dynamics of
Nonholonomic Systems*, 1972; Greenwood, *Advanced Dynamics*, 2003): the blade
turns at a constant rate omega, and from rest at the origin
x = c sin^2(omega t), y = c (omega t - sin(2 omega t) / 2), c = g sin(alpha) /
(2 omega^2), with x down the slope; the blade's sideways force is
2 m g sin(alpha) sin(omega t). The Chaplygin sleigh: v' = a w^2,
w' = -(m a / J) v w, solved in closed form by tanh and sech.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax import bodies as lb


def skate_lagrangian(t, q, qd, p):
    kinetic = 0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["I"] * qd[2] ** 2
    return kinetic + p["m"] * p["g"] * jnp.sin(p["alpha"]) * q[0]


def blade(t, q, qd, p):
    return jnp.atleast_1d(-qd[0] * jnp.sin(q[2]) + qd[1] * jnp.cos(q[2]))


SKATE = lx.System(skate_lagrangian, velocity_constraints=blade)
PARAMS = {"m": 2.0, "I": 0.1, "g": 9.81, "alpha": 0.3}
TS = jnp.linspace(0.0, 3.0, 31)


def skate_exact(t, omega, p):
    c = p["g"] * np.sin(p["alpha"]) / (2 * omega**2)
    x = c * np.sin(omega * t) ** 2
    y = c * (omega * t - 0.5 * np.sin(2 * omega * t))
    force = 2 * p["m"] * p["g"] * np.sin(p["alpha"]) * np.sin(omega * t)
    return x, y, force


@jax.jit
def skate_run(omega, params):
    qd0 = jnp.stack([0.0, 0.0, omega])
    return lx.simulate(
        SKATE, jnp.zeros(3), qd0, params, t1=3.0, ts=TS, rtol=1e-11, atol=1e-11,
        stabilization=lx.Projection(),
    )  # fmt: skip


def test_knife_edge_on_an_incline_matches_the_closed_form():
    omega = 2.0
    sol = skate_run(omega, PARAMS)
    x, y, force = skate_exact(np.asarray(TS), omega, PARAMS)
    np.testing.assert_allclose(sol.q[:, 0], x, atol=1e-9)
    np.testing.assert_allclose(sol.q[:, 1], y, atol=1e-9)
    np.testing.assert_allclose(sol.q[:, 2], omega * TS, atol=1e-9)
    # The multiplier is the sideways force on the blade (A^T mu, A = n^T).
    np.testing.assert_allclose(sol.multipliers[:, 0], force, atol=1e-8)
    assert sol.multipliers.shape == sol.phi.shape == sol.phi_dot.shape == (31, 1)
    assert float(jnp.abs(sol.phi_dot).max()) < 1e-14  # psi, projected
    assert float(jnp.abs(sol.phi).max()) == 0.0  # no position residual


def test_knife_edge_vmap_and_grad_match_the_closed_form():
    omegas = jnp.array([1.0, 2.0, 3.0])
    sols = jax.vmap(skate_run, (0, None))(omegas, PARAMS)
    for k, omega in enumerate(np.asarray(omegas)):
        x, y, _ = skate_exact(np.asarray(TS), omega, PARAMS)
        np.testing.assert_allclose(sols.q[k, :, 1], y, atol=1e-9)

    # d x(T) / d alpha and d y(T) / d omega, exactly: through the nonholonomic
    # solve and the projection.
    def final(omega, alpha):
        sol = skate_run(omega, {**PARAMS, "alpha": alpha})
        return sol.q[-1, 0], sol.q[-1, 1]

    omega, alpha, t = 2.0, 0.3, 3.0
    # Both derivatives from one compiled reverse-mode Jacobian.
    jac = jax.jit(jax.jacrev(final, argnums=(0, 1)))(
        jnp.asarray(omega), jnp.asarray(alpha)
    )
    dx_da, dy_dw = jac[0][1], jac[1][0]
    g = PARAMS["g"]
    np.testing.assert_allclose(
        dx_da, g * np.cos(alpha) / (2 * omega**2) * np.sin(omega * t) ** 2, rtol=1e-7
    )
    c = g * np.sin(alpha)
    y_of_w = lambda w: c / (2 * w**2) * (w * t - 0.5 * np.sin(2 * w * t))  # noqa: E731
    h = 1e-6
    np.testing.assert_allclose(
        dy_dw, (y_of_w(omega + h) - y_of_w(omega - h)) / (2 * h), rtol=1e-6
    )


def test_knife_edge_built_from_bodies_is_the_same_system():
    body = lb.PlanarBody(0, "m", "I")
    system = lb.assemble(
        [body],
        gravity=lambda p: jnp.stack([p["g"] * jnp.sin(p["alpha"]), 0.0]),
        velocity_constraints=[lb.KnifeEdge(body, None, (1.0, 0.0))],
    )
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, qd = rng.normal(size=3), rng.normal(size=3)
        by_hand = lx.accelerations(SKATE, 0.0, q, qd, PARAMS)
        built = lx.accelerations(system, 0.0, q, qd, PARAMS)
        np.testing.assert_allclose(built[0], by_hand[0], atol=1e-12)
        np.testing.assert_allclose(built[1], by_hand[1], atol=1e-12)


def test_velocity_constraint_terms_and_baumgarte():
    q, qd = jnp.array([0.1, -0.2, 0.7]), jnp.array([0.3, 0.5, -1.1])  # psi != 0
    # Under jit: one program, rather than every autodiff operation compiled alone.
    terms = jax.jit(lambda q, qd: lx.mechanics(SKATE, 0.0, q, qd, PARAMS))(q, qd)
    a = np.array([-np.sin(0.7), np.cos(0.7), 0.0])
    np.testing.assert_allclose(terms.jac, a[None], atol=1e-15)
    np.testing.assert_allclose(terms.phi_dot, [a @ np.asarray(qd)], atol=1e-15)
    # gamma_v = (dA/dt) qd = thd * (-cos th xd - sin th yd).
    gamma = -1.1 * (-np.cos(0.7) * 0.3 - np.sin(0.7) * 0.5)
    np.testing.assert_allclose(terms.gamma, [gamma], atol=1e-15)
    stab = lx.Baumgarte(2.0, 3.0)
    qdd, _ = lx.accelerations(SKATE, 0.0, q, qd, PARAMS, stab)
    np.testing.assert_allclose(
        terms.jac @ qdd, -terms.gamma - 2 * 2.0 * terms.phi_dot, atol=1e-12
    )


def test_consistent_state_and_simulate_honour_velocity_constraints():
    q, qd = jnp.array([0.0, 0.0, 0.4]), jnp.array([1.0, 0.0, 2.0])
    with pytest.raises(Exception, match="initial state is not consistent"):
        lx.simulate(SKATE, q, qd, PARAMS, t1=0.1)
    q0, qd0 = lx.consistent_state(SKATE, q, qd, PARAMS, fixed_qd=[0, 2])
    np.testing.assert_allclose(qd0, [1.0, np.tan(0.4), 2.0], atol=1e-14)
    np.testing.assert_array_equal(q0, q)
    sol = lx.simulate(SKATE, q, qd, PARAMS, t1=0.1, project_initial=True)
    assert abs(float(sol.phi_dot[0, 0])) < 1e-14


def test_velocity_constraints_of_the_wrong_shape_are_named():
    system = lx.System(skate_lagrangian, velocity_constraints=lambda t, q, qd, p: 0.0)
    with pytest.raises(ValueError, match="velocity_constraints .* must return a 1-D"):
        lx.accelerations(system, 0.0, jnp.zeros(3), jnp.zeros(3), PARAMS)
    with pytest.raises(TypeError, match="velocity_constraints"):
        lx.System(skate_lagrangian, velocity_constraints=3.0)


def test_velocity_constraints_that_are_not_affine_are_refused():
    def squared(t, q, qd, p):
        return jnp.atleast_1d(qd[1] ** 2 - qd[0] ** 2)

    system = lx.System(skate_lagrangian, velocity_constraints=squared)
    qd0 = jnp.array([1.0, 1.0, 0.0])  # psi = 0, but psi is not A qd + b
    sol = lx.simulate(system, jnp.zeros(3), qd0, PARAMS, t1=0.1, throw=False)
    assert sol.result == lx.RESULTS.velocity_constraints_not_affine
    with pytest.raises(Exception, match="not affine in qd"):
        lx.simulate(system, jnp.zeros(3), qd0, PARAMS, t1=0.1)


def test_chaplygin_sleigh_matches_the_closed_form():
    model = lx.systems.sleigh()
    p = model.params
    q0, qd0 = model.initial_state()
    ts = jnp.linspace(0.0, 6.0, 25)
    sol = lx.simulate(
        model.system, q0, qd0, p, t1=6.0, ts=ts, rtol=1e-11, atol=1e-11,
        stabilization=lx.Projection(),
    )  # fmt: skip
    th = np.asarray(sol.q[:, 2])
    v = np.asarray(sol.qd[:, 0]) * np.cos(th) + np.asarray(sol.qd[:, 1]) * np.sin(th)
    w = np.asarray(sol.qd[:, 2])
    m, a = p["m"], p["a"]
    inertia = p["I"] + m * a**2
    w0 = float(qd0[2])
    energy = 0.5 * inertia * w0**2  # v0 = 0
    speed = np.sqrt(2 * energy / m)
    s = a * m * speed * np.asarray(ts) / inertia
    np.testing.assert_allclose(v, speed * np.tanh(s), atol=1e-9)
    np.testing.assert_allclose(w, w0 / np.cosh(s), atol=1e-9)
    # Conserved to the solve's tolerance: 1e-11 per step, 1.1e-10 at the worst
    # saved time with XLA's cheaper code generation (its rounding differs).
    np.testing.assert_allclose(sol.energy, energy, rtol=3e-10)


def test_driven_skate_mixes_holonomic_and_velocity_constraints():
    # The skate's heading driven by a rheonomic constraint theta = omega t: the
    # motion is the free skate's (its heading turns uniformly anyway), the
    # drive needs no torque, and the blade's force is as before. Multipliers
    # and residuals come holonomic rows first.
    omega = 2.0
    body = lb.PlanarBody(0, "m", "I")
    system = lb.assemble(
        [body],
        [lb.Driver(body, lambda t, p: omega * t)],
        gravity=lambda p: jnp.stack([p["g"] * jnp.sin(p["alpha"]), 0.0]),
        velocity_constraints=[lb.KnifeEdge(body, None, (1.0, 0.0))],
    )
    # The blade zeroes yd, the drive sets thd; xd (free along the blade) stays.
    q0, qd0 = lx.consistent_state(
        system, jnp.zeros(3), jnp.array([0.0, 0.3, 1.0]), PARAMS
    )
    np.testing.assert_allclose(qd0, [0.0, 0.0, omega], atol=1e-14)
    sol = lx.simulate(
        system, q0, qd0, PARAMS, t1=3.0, ts=TS, rtol=1e-11, atol=1e-11,
        stabilization=lx.Projection(),
    )  # fmt: skip
    x, y, force = skate_exact(np.asarray(TS), omega, PARAMS)
    np.testing.assert_allclose(sol.q[:, 0], x, atol=1e-9)
    np.testing.assert_allclose(sol.q[:, 1], y, atol=1e-9)
    np.testing.assert_allclose(sol.multipliers[:, 0], 0.0, atol=1e-8)
    np.testing.assert_allclose(sol.multipliers[:, 1], force, atol=1e-8)
    assert sol.phi.shape == sol.phi_dot.shape == (31, 2)
    assert float(jnp.abs(sol.phi[:, 0]).max()) < 1e-14
    assert float(jnp.abs(sol.phi_dot).max()) < 1e-13
