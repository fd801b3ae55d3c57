"""The slider pendulum (6 absolute coordinates) against its 2-dof minimal form."""

import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx

from .helpers import solve_reference


MODEL = lx.systems.slider_pendulum()
P = MODEL.params
M1, M2, LEN, K, G = P["m1"], P["m2"], P["L"], P["k"], P["g"]
I2 = M2 * LEN**2 / 12
H = LEN / 2
TS = np.linspace(0.0, 5.0, 51)


def minimal_rhs(t, y):
    """Coordinates (x1, th2): the Lagrange equations written out by hand."""
    x, th, xd, thd = y
    s, c = np.sin(th), np.cos(th)
    mass = np.array([[M1 + M2, -M2 * H * s], [-M2 * H * s, M2 * H**2 + I2]])
    rhs = np.array([M2 * H * c * thd**2 - K * x, -M2 * G * H * c])
    xdd, thdd = np.linalg.solve(mass, rhs)
    return [xd, thd, xdd, thdd]


@pytest.fixture(scope="module")
def reference():
    ref = solve_reference(minimal_rhs, [0.0, 0.0, 0.0, 0.0], TS)
    x, th, xd, thd = ref.T
    xdd, thdd = np.array([minimal_rhs(0.0, y)[2:] for y in ref]).T
    return x, th, xd, thd, xdd, thdd


@pytest.fixture(scope="module")
def trajectory():
    q0, qd0 = MODEL.initial_state()
    return lx.simulate(
        MODEL.system, q0, qd0, P, t1=TS[-1], ts=TS, rtol=1e-11, atol=1e-11
    )


def test_initial_state_from_fixed_coordinates():
    q0, qd0 = MODEL.initial_state()
    # x1 = 0 and th2 = 0 were fixed; the constraints give the rest exactly.
    np.testing.assert_allclose(q0, [0.0, 0.0, 0.0, H, 0.0, 0.0], atol=1e-14)
    np.testing.assert_array_equal(qd0, 0.0)


def test_positions_match_minimal_coordinates(trajectory, reference):
    x, th, xd, thd, *_ = reference
    q = np.asarray(trajectory.q)
    np.testing.assert_allclose(q[:, 0], x, atol=1e-9)
    np.testing.assert_allclose(q[:, 5], th, atol=1e-9)
    np.testing.assert_allclose(q[:, 3], x + H * np.cos(th), atol=1e-9)
    np.testing.assert_allclose(q[:, 4], H * np.sin(th), atol=1e-9)
    np.testing.assert_allclose(q[:, [1, 2]], 0.0, atol=1e-12)
    np.testing.assert_allclose(trajectory.qd[:, 0], xd, atol=1e-8)
    np.testing.assert_allclose(trajectory.qd[:, 5], thd, atol=1e-8)


def test_multipliers_are_the_joint_forces(trajectory, reference):
    """Newton-Euler on the bar gives the pin force; the track moment is zero."""
    x, th, xd, thd, xdd, thdd = reference
    s, c = np.sin(th), np.cos(th)
    # Acceleration of the bar's mass centre, r2 = (x1 + H cos th, H sin th).
    a2x = xdd - H * (s * thdd + c * thd**2)
    a2y = H * (c * thdd - s * thd**2)
    lam = np.asarray(trajectory.multipliers)
    # The pin rows of J on the bar are -1: the force on the bar is -lam[2:4].
    np.testing.assert_allclose(-lam[:, 2], M2 * a2x, atol=1e-7)
    np.testing.assert_allclose(-lam[:, 3], M2 * a2y + M2 * G, atol=1e-7)
    # The track carries the block's weight plus the pin force on the block.
    np.testing.assert_allclose(lam[:, 0], M1 * G - lam[:, 3], atol=1e-7)
    np.testing.assert_allclose(lam[:, 1], 0.0, atol=1e-12)


def test_energy_is_conserved(trajectory):
    energy = np.asarray(trajectory.energy)
    assert np.abs(energy - energy[0]).max() < 1e-9


def test_the_bar_swings_and_the_block_moves(trajectory):
    # Guards the comparisons above against a trivial (resting) solution.
    assert np.ptp(np.asarray(trajectory.q[:, 5])) > 1.0
    assert np.ptp(np.asarray(trajectory.q[:, 0])) > 0.05
    assert jnp.all(jnp.isfinite(trajectory.multipliers))
