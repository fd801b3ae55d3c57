"""Rheonomic systems: a pendulum whose pivot is driven, s(t) = (A sin(w t), 0).

Written two independent ways, both against the minimal-coordinate equation
theta'' = -(g/l) sin(theta) - (s''(t)/l) cos(theta):

- absolute coordinates with a time-dependent constraint |q - s(t)|^2 = l^2;
- coordinates relative to the pivot with a time-dependent Lagrangian,
  L = m |qd + s'(t)|^2 / 2 - m g q_y, and the constraint |q|^2 = l^2.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx

from .helpers import solve_reference


PARAMS = {"m": 1.5, "l": 1.2, "g": 9.81, "A": 0.3, "w": 4.0}
TS = np.linspace(0.0, 4.0, 41)
THETA0 = 0.7


def _pivot(t, p):
    return jnp.stack([p["A"] * jnp.sin(p["w"] * t), jnp.zeros_like(t)])


def _pivot_velocity(t, p):
    return jnp.stack([p["A"] * p["w"] * jnp.cos(p["w"] * t), jnp.zeros_like(t)])


def absolute_lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * q[1]


def absolute_constraint(t, q, p):
    r = q - _pivot(t, p)
    return jnp.stack([r @ r - p["l"] ** 2])


def relative_lagrangian(t, q, qd, p):
    v = qd + _pivot_velocity(t, p)
    return 0.5 * p["m"] * v @ v - p["m"] * p["g"] * q[1]


def relative_constraint(t, q, p):
    return jnp.stack([q @ q - p["l"] ** 2])


def minimal_rhs(t, y, p=PARAMS):
    th, om = y
    sdd = -p["A"] * p["w"] ** 2 * np.sin(p["w"] * t)
    return [om, -(p["g"] / p["l"]) * np.sin(th) - sdd / p["l"] * np.cos(th)]


@pytest.fixture(scope="module")
def reference():
    ref = solve_reference(minimal_rhs, [THETA0, 0.0], TS)
    th, om = ref.T
    l = PARAMS["l"]
    rel = l * np.stack([np.sin(th), -np.cos(th)], axis=1)
    rel_d = l * om[:, None] * np.stack([np.cos(th), np.sin(th)], axis=1)
    return th, om, rel, rel_d


def _start(t=0.0):
    l = PARAMS["l"]
    rel = l * np.array([np.sin(THETA0), -np.cos(THETA0)])
    return rel, np.asarray(_pivot(t, PARAMS)), np.asarray(_pivot_velocity(t, PARAMS))


def _rod_force(th, om, t, p=PARAMS):
    """lam from the radial balance in the pivot's accelerating frame."""
    sdd = -p["A"] * p["w"] ** 2 * np.sin(p["w"] * t)
    m, l, g = p["m"], p["l"], p["g"]
    # m (a_rel + s'') . e_r = F_g . e_r + 2 l lam, a_rel . e_r = -l om^2.
    e_r = np.stack([np.sin(th), -np.cos(th)], axis=1)
    radial_inertia = m * (-l * om**2 + sdd * e_r[:, 0])
    radial_gravity = -m * g * e_r[:, 1]
    return (radial_inertia - radial_gravity) / (2 * l)


@pytest.mark.parametrize("stabilization", [lx.NoStabilization(), lx.Projection()])
def test_time_dependent_constraint(reference, stabilization):
    th, om, rel, rel_d = reference
    rel0, s0, sd0 = _start()
    system = lx.System(absolute_lagrangian, absolute_constraint)
    # The start must move with the pivot: qd = s'(0) + relative velocity (0 here).
    q0, qd0 = lx.consistent_state(system, rel0 + s0, np.zeros(2), PARAMS)
    np.testing.assert_allclose(q0, rel0 + s0, atol=1e-14)
    np.testing.assert_allclose(qd0 @ rel0, sd0 @ rel0, atol=1e-14)
    # consistent_state gives the minimal-norm velocity, not the one at rest in
    # the pivot frame; start from the latter to compare with the reference.
    qd0 = sd0
    sol = lx.simulate(
        system,
        q0,
        qd0,
        PARAMS,
        t1=TS[-1],
        ts=TS,
        rtol=1e-11,
        atol=1e-11,
        stabilization=stabilization,
    )
    pivot = np.asarray(jnp.stack([_pivot(t, PARAMS) for t in TS]))
    pivot_d = np.asarray(jnp.stack([_pivot_velocity(t, PARAMS) for t in TS]))
    np.testing.assert_allclose(sol.q, rel + pivot, atol=1e-9)
    np.testing.assert_allclose(sol.qd, rel_d + pivot_d, atol=1e-8)
    np.testing.assert_allclose(sol.multipliers[:, 0], _rod_force(th, om, TS), atol=1e-7)
    assert np.abs(np.asarray(sol.phi)).max() < 1e-8  # drift, without projection
    assert np.abs(np.asarray(sol.phi_dot)).max() < 1e-8


def test_time_dependent_lagrangian(reference):
    th, om, rel, rel_d = reference
    rel0, _, _ = _start()
    system = lx.System(relative_lagrangian, relative_constraint)
    sol = lx.simulate(
        system, rel0, np.zeros(2), PARAMS, t1=TS[-1], ts=TS, rtol=1e-11, atol=1e-11
    )
    np.testing.assert_allclose(sol.q, rel, atol=1e-9)
    np.testing.assert_allclose(sol.qd, rel_d, atol=1e-8)
    np.testing.assert_allclose(sol.multipliers[:, 0], _rod_force(th, om, TS), atol=1e-7)


def test_projection_holds_rheonomic_constraints_at_loose_tolerance():
    rel0, s0, sd0 = _start()
    system = lx.System(absolute_lagrangian, absolute_constraint)
    sol = lx.simulate(
        system,
        rel0 + s0,
        sd0,
        PARAMS,
        t1=TS[-1],
        ts=TS,
        rtol=1e-4,
        atol=1e-4,
        stabilization=lx.Projection(),
    )
    assert np.abs(np.asarray(sol.phi)).max() < 1e-12
    assert np.abs(np.asarray(sol.phi_dot)).max() < 1e-12
