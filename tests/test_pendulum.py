"""The Cartesian pendulum against theta'' = -(g/l) sin(theta), and its drift."""

import diffrax as dfx
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx

from .helpers import solve_reference


MODEL = lx.systems.pendulum()
P = MODEL.params
G, L, MASS = P["g"], P["l"], P["m"]


@pytest.fixture(scope="module")
def initial():
    return MODEL.initial_state()


def _theta(q):
    # theta from the downward vertical: x = l sin(theta), y = -l cos(theta).
    return np.arctan2(q[..., 0], -q[..., 1])


def test_initial_state_is_the_projected_guess(initial):
    q0, qd0 = initial
    guess = np.array([0.86, 2.35])
    np.testing.assert_allclose(q0, L * guess / np.linalg.norm(guess), rtol=1e-14)
    np.testing.assert_array_equal(qd0, 0.0)


def test_textbook_initial_multiplier(initial):
    q0, qd0 = initial
    qdd, lam = lx.accelerations(MODEL.system, 0.0, q0, qd0, P)
    assert lam.shape == (1,)
    assert round(float(lam[0]), 2) in (3.68, 3.69)  # the textbook quotes 3.69
    # At rest the rod force balances the radial part of gravity exactly.
    assert float(lam[0]) == pytest.approx(
        MASS * G * float(q0[1]) / (2 * L**2), rel=1e-12
    )
    # Released at rest, the acceleration is tangential: g sin(theta).
    np.testing.assert_allclose(q0 @ qdd, 0.0, atol=1e-12)


@pytest.mark.parametrize("stabilization", ["none", "projection"])
def test_matches_minimal_coordinates(initial, stabilization):
    q0, qd0 = initial
    stab = {"none": lx.NoStabilization(), "projection": lx.Projection()}
    ts = np.linspace(0.0, 10.0, 41)
    sol = lx.simulate(
        MODEL.system,
        q0,
        qd0,
        P,
        t1=10.0,
        ts=ts,
        solver=dfx.Dopri8(),
        rtol=1e-10,
        atol=1e-10,
        stabilization=stab[stabilization],
    )
    ref = solve_reference(
        lambda t, y: [y[1], -(G / L) * np.sin(y[0])], [_theta(np.asarray(q0)), 0.0], ts
    )
    theta, omega = ref[:, 0], ref[:, 1]
    q_ref = L * np.stack([np.sin(theta), -np.cos(theta)], axis=1)
    qd_ref = L * omega[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    np.testing.assert_allclose(sol.q, q_ref, atol=2e-8 * L)
    np.testing.assert_allclose(sol.qd, qd_ref, atol=2e-8 * L * np.abs(omega).max())
    # The rod force from the radial balance: -m l w^2 = m g cos(theta) + 2 l lam.
    lam_ref = -(MASS * L * omega**2 + MASS * G * np.cos(theta)) / (2 * L)
    np.testing.assert_allclose(sol.multipliers[:, 0], lam_ref, atol=1e-7)
    assert sol.result == lx.RESULTS.successful


@pytest.fixture(scope="module")
def drift_runs(initial):
    """The textbook study: 50 s at rtol = 1e-6 under each stabilization, with
    Dormand-Prince 5(4) (MATLAB's ode45) as in the textbook."""
    q0, qd0 = initial
    ts = jnp.linspace(0.0, 50.0, 501)
    runs = {}
    for name, stab in [
        ("none", lx.NoStabilization()),
        ("baumgarte", lx.Baumgarte(5.0, 5.0)),
        ("projection", lx.Projection()),
    ]:
        runs[name] = lx.simulate(
            MODEL.system,
            q0,
            qd0,
            P,
            t1=50.0,
            ts=ts,
            rtol=1e-6,
            atol=1e-6,
            solver=dfx.Dopri5(),
            stabilization=stab,
        )
    return runs


def test_unstabilized_drift_grows(drift_runs):
    err = np.abs(np.asarray(drift_runs["none"].phi[:, 0]))
    early, late = err[:100].max(), err[-100:].max()  # first and last 10 s
    assert late > 1e-3 * L**2  # visibly off the circle after 50 s
    assert late > 10 * early  # and growing


def test_baumgarte_bounds_drift(drift_runs):
    err = np.abs(np.asarray(drift_runs["baumgarte"].phi[:, 0]))
    unstabilized = np.abs(np.asarray(drift_runs["none"].phi[:, 0]))
    assert err.max() < 1e-4 * L**2
    assert err[-100:].max() < 3 * err[:100].max() + 1e-9  # bounded, not growing
    assert err[-1] < 1e-2 * unstabilized[-1]


def test_projection_keeps_every_saved_state_on_the_manifold(drift_runs):
    sol = drift_runs["projection"]
    assert np.abs(np.asarray(sol.phi)).max() < 1e-12 * L**2
    assert np.abs(np.asarray(sol.phi_dot)).max() < 1e-12 * L**2


def test_energy_drift_is_smallest_with_projection(drift_runs):
    drift = {
        name: abs(float(sol.energy[-1] - sol.energy[0]))
        for name, sol in drift_runs.items()
    }
    assert drift["projection"] < drift["none"]
