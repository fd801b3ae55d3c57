"""The Cartesian double pendulum: energy, and the two-angle form solved by scipy."""

import numpy as np
import pytest

import lagrax as lx

from .helpers import solve_reference


MODEL = lx.systems.double_pendulum()
P = MODEL.params
TS = np.linspace(0.0, 8.0, 33)


def minimal_rhs(t, y, m=P["m"], l=P["l"], g=P["g"], k=P["k"]):
    """Link angles (a1, a2) from the horizontal, Lagrange equations by hand."""
    a1, a2, w1, w2 = y
    inertia = m * l**2 / 3
    c, s = np.cos(a1 - a2), np.sin(a1 - a2)
    mass = np.array(
        [[2 * m * l**2 + inertia, m * l**2 * c], [m * l**2 * c, m * l**2 + inertia]]
    )
    dv1 = 2 * m * g * l * np.cos(a1) - k * (a2 - a1)
    dv2 = m * g * l * np.cos(a2) + k * (a2 - a1)
    rhs = np.array([-m * l**2 * s * w2**2 - dv1, m * l**2 * s * w1**2 - dv2])
    return [w1, w2, *np.linalg.solve(mass, rhs)]


@pytest.fixture(scope="module")
def trajectory():
    q0, qd0 = MODEL.initial_state()
    return lx.simulate(
        MODEL.system, q0, qd0, P, t1=TS[-1], ts=TS, rtol=1e-11, atol=1e-11
    )


def test_default_initial_state_is_already_consistent():
    q0, qd0 = MODEL.initial_state()
    np.testing.assert_allclose(q0, 2.0 / np.sqrt(2.0), rtol=1e-15)
    np.testing.assert_allclose(qd0, [1.0, -1.0, 1.0, -1.0], rtol=1e-15)


def test_energy_is_conserved(trajectory):
    energy = np.asarray(trajectory.energy)
    assert np.abs(energy - energy[0]).max() < 1e-9 * np.abs(energy[0])


def test_energy_is_kinetic_plus_potential(trajectory):
    q, qd = np.asarray(trajectory.q[0]), np.asarray(trajectory.qd[0])
    m, l, g = P["m"], P["l"], P["g"]
    w = (q[0] * qd[1] - q[1] * qd[0]) / l**2  # both links turn at this rate
    v1, v2 = qd[:2], qd[:2] + qd[2:]
    kinetic = 0.5 * m * (v1 @ v1 + v2 @ v2) + 0.5 * (m * l**2 / 3) * 2 * w**2
    potential = m * g * (q[1] + q[1] + q[3])  # relative angle 0: no spring energy
    assert float(trajectory.energy[0]) == pytest.approx(kinetic + potential, 1e-14)


def test_matches_two_angle_form(trajectory):
    q0, qd0 = (np.asarray(x) for x in MODEL.initial_state())
    a0 = [np.arctan2(q0[1], q0[0]), np.arctan2(q0[3], q0[2])]
    w0 = [
        (q0[0] * qd0[1] - q0[1] * qd0[0]) / P["l"] ** 2,
        (q0[2] * qd0[3] - q0[3] * qd0[2]) / P["l"] ** 2,
    ]
    ref = solve_reference(minimal_rhs, [*a0, *w0], TS)
    a1, a2 = ref[:, 0], ref[:, 1]
    assert np.abs(a2 - a1).max() < np.pi  # the spring angle never wraps here
    l = P["l"]
    q_ref = l * np.stack([np.cos(a1), np.sin(a1), np.cos(a2), np.sin(a2)], axis=1)
    np.testing.assert_allclose(trajectory.q, q_ref, atol=1e-8)


def test_friction_dissipates_energy():
    params = {**P, "c": 0.3}
    q0, qd0 = MODEL.initial_state(params)
    sol = lx.simulate(
        MODEL.system, q0, qd0, params, t1=TS[-1], ts=TS, rtol=1e-9, atol=1e-9
    )
    energy = np.asarray(sol.energy)
    assert np.all(np.diff(energy) < 0)
    assert energy[0] - energy[-1] > 1.0  # J of 47 dissipated visibly
