"""lx.fit: parameters recovered from synthetic observations, their standard
errors against scipy's curve_fit on the closed-form solution."""

import re

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.optimize import curve_fit

import lagrax as lx


PENDULUM = lx.systems.pendulum()


def _oscillator_lagrangian(t, q, qd, p):
    return 0.5 * qd @ qd - 0.5 * p["k"] * q @ q


def _damper(t, q, qd, p):
    return -p["c"] * qd


OSCILLATOR = lx.System(_oscillator_lagrangian, forces=_damper)


def _closed_form(t, x0, k, c):
    """x(t) of x'' + c x' + k x = 0 from x0 at rest (underdamped)."""
    gamma = c / 2
    omega = np.sqrt(k - gamma**2)
    return (
        x0
        * np.exp(-gamma * t)
        * (np.cos(omega * t) + gamma / omega * np.sin(omega * t))
    )


def test_mass_from_the_constraint_force_alone():
    """The motion of a pendulum does not depend on its mass; the rod force does.
    Fitted to the multipliers, the mass (and length) are recovered exactly."""
    true = {**PENDULUM.params, "m": 2.0, "l": 2.5}
    ts = jnp.linspace(0.0, 1.0, 21)
    q0 = jnp.array([2.5 * np.sin(2.0), -2.5 * np.cos(2.0)])

    def start(params):
        # Same angle, radius from the parameters: consistent for any l.
        return lx.consistent_state(PENDULUM.system, q0, jnp.zeros(2), params)

    def observe(traj, params):
        return traj.multipliers[:, 0]

    data = observe(
        lx.simulate(PENDULUM.system, *start(true), true, t1=1.0, ts=ts), true
    )
    result = lx.fit(
        PENDULUM.system, {**true, "m": 3.0, "l": 2.0}, observe, data, ts=ts,
        initial_state=start, fit=["m", "l"], positive=["m", "l"], progress=False,
    )  # fmt: skip
    assert result.converged, result.message
    assert float(result.params["m"]) == pytest.approx(2.0, rel=1e-6)
    assert float(result.params["l"]) == pytest.approx(2.5, rel=1e-6)
    assert result.params["g"] == true["g"]  # not fitted, untouched
    assert result.loss < 1e-10 * result.loss_history[0]
    assert result.steps < 30  # Levenberg-Marquardt: few iterations


@pytest.mark.parametrize("experiments, segments", [(None, None), (3, None), (3, 6)])
def test_estimates_and_standard_errors_match_curve_fit(experiments, segments):
    """A damped oscillator fitted to noisy positions (one experiment, or three
    from different starts sharing k and c; by single or by multiple shooting):
    the estimates and the standard errors (s^2 (J^T J)^-1, in the physical
    parameters although k is fitted in log space) equal scipy's curve_fit on
    the closed-form solution. Multiple shooting, its nodes started on the data,
    reaches the same optimum, with continuity between its segments held to
    round-off."""
    true_k, true_c = 4.0, 0.3
    ts = np.linspace(0.0, 6.0, 61)
    x0s = np.array([1.0]) if experiments is None else np.array([1.0, -0.5, 2.0])
    rng = np.random.default_rng(1)
    clean = np.stack([_closed_form(ts, x0, true_k, true_c) for x0 in x0s])
    noisy = clean + 0.02 * rng.normal(size=clean.shape)
    q0 = jnp.asarray(x0s)[:, None]
    if experiments is None:
        data, initial = noisy[0], (q0[0], jnp.zeros(1))
    else:
        data, initial = noisy, (q0, jnp.zeros_like(q0))
    # Multiple shooting starts its nodes on the data (velocities by differences).
    guess = None
    if segments is not None:
        guess = (noisy[..., None], np.gradient(noisy, ts, axis=-1)[..., None])
    result = lx.fit(
        OSCILLATOR, {"k": 3.0, "c": 0.5}, lambda traj, p: traj.q[:, 0], data,
        ts=ts, initial_state=initial, experiments=experiments, positive=["k"],
        segments=segments, states_guess=guess, progress=False, rtol=1e-9, atol=1e-9,
        stepsize_controller=dfx.PIDController(rtol=1e-12, atol=1e-12),
    )  # fmt: skip
    assert result.converged, result.message
    if segments is None:
        assert result.max_violation is None
    else:
        assert result.max_violation < 1e-9

    def model(t, k, c):
        return np.concatenate([_closed_form(t[: ts.size], x0, k, c) for x0 in x0s])

    stacked_t = np.tile(ts, len(x0s))
    popt, pcov = curve_fit(model, stacked_t, noisy.ravel(), p0=[3.0, 0.5],
                           xtol=1e-14, ftol=1e-14)  # fmt: skip
    fitted = [float(result.params["k"]), float(result.params["c"])]
    np.testing.assert_allclose(fitted, popt, rtol=1e-6)
    stderr = [float(result.stderr["k"]), float(result.stderr["c"])]
    np.testing.assert_allclose(stderr, np.sqrt(np.diag(pcov)), rtol=1e-4)
    assert result.covariance_names == ["c", "k"] or result.covariance_names == [
        "k",
        "c",
    ]
    order = [result.covariance_names.index(name) for name in ("k", "c")]
    np.testing.assert_allclose(
        result.covariance[np.ix_(order, order)], pcov, rtol=1e-4, atol=1e-12
    )
    # The truth lies within three standard errors.
    assert abs(fitted[0] - true_k) < 3 * stderr[0]
    assert abs(fitted[1] - true_c) < 3 * stderr[1]


def test_trial_points_the_model_cannot_evaluate_are_rejected():
    """The start fixes x0 = 2 and solves y0 on the circle of radius l: no
    consistent state exists for l < 2. From l = 4 the first steps try such
    points; they are rejected (not raised), and the fit reaches l = 2.02. From
    l = 1.5 nothing can be evaluated: a clear message, no exception; and that
    second fit of the same model reuses the first one's compiled solve."""
    tried, traces = [], [0]

    def start(params):
        traces[0] += 1
        jax.debug.callback(lambda l: tried.append(float(l)), params["l"])
        return lx.consistent_state(
            PENDULUM.system, jnp.array([2.0, -0.1]), jnp.zeros(2), params,
            fixed_q=[0],
        )  # fmt: skip

    true = {**PENDULUM.params, "l": 2.02}
    ts = jnp.linspace(0.0, 2.0, 41)
    data = lx.simulate(PENDULUM.system, *start(true), true, t1=2.0, ts=ts).q[:, 1]
    observe = lambda traj, p: traj.q[:, 1]  # noqa: E731
    tried.clear()
    result = lx.fit(PENDULUM.system, {**true, "l": 4.0}, observe, data, ts=ts,
                    initial_state=start, fit=["l"], progress=False)  # fmt: skip
    assert result.converged, result.message
    assert float(result.params["l"]) == pytest.approx(2.02, rel=1e-9)
    assert min(tried) < 2.0  # a trial point outside the model's domain was tried
    traced = traces[0]
    bad = lx.fit(PENDULUM.system, {**true, "l": 1.5}, observe, data, ts=ts,
                 initial_state=start, fit=["l"], progress=False)  # fmt: skip
    assert not bad.converged
    assert "cannot be evaluated at the starting parameters" in bad.message
    assert float(bad.params["l"]) == 1.5
    assert traces[0] == traced + 1  # traced once to check shapes, not compiled


def test_a_fit_that_does_not_explain_the_data_says_so():
    """With the noise level given, residuals far above it are reported (a local
    minimum, or the wrong model), not passed over; at the true noise level not."""
    ts = np.linspace(0.0, 6.0, 61)
    rng = np.random.default_rng(2)
    data = _closed_form(ts, 1.0, 4.0, 0.3) + 0.02 * rng.normal(size=ts.shape)
    kw = dict(ts=ts, initial_state=(jnp.ones(1), jnp.zeros(1)), progress=False)
    observe = lambda traj, p: traj.q[:, 0]  # noqa: E731
    start = {"k": 3.0, "c": 0.5}
    right = lx.fit(OSCILLATOR, start, observe, data, sigma=0.02, **kw)
    assert right.converged and "noise level" not in right.message
    wrong = lx.fit(OSCILLATOR, start, observe, data, sigma=0.002, **kw)
    found = re.search(r"residuals are ([\d.]+) times the noise level", wrong.message)
    assert found and 8 < float(found.group(1)) < 12, wrong.message  # 0.02 / 0.002


def test_max_steps_is_not_convergence():
    ts = jnp.linspace(0.0, 2.0, 21)
    data = jnp.asarray(_closed_form(np.asarray(ts), 1.0, 4.0, 0.3))
    result = lx.fit(
        OSCILLATOR, {"k": 2.0, "c": 0.1}, lambda traj, p: traj.q[:, 0], data,
        ts=ts, initial_state=(jnp.ones(1), jnp.zeros(1)), max_steps=2,
        progress=False,
    )  # fmt: skip
    assert not result.converged
    assert "max_steps = 2" in result.message
    assert len(result.loss_history) == result.steps + 1 == 3


def test_any_optax_optimizer():
    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd - 0.5 * p["w"] ** 2 * q @ q

    system = lx.System(lagrangian)
    ts = jnp.linspace(0.0, 2.0, 21)
    data = jnp.cos(1.5 * ts)
    result = lx.fit(
        system, {"w": 1.2}, lambda traj, p: traj.q[:, 0], data, ts=ts,
        initial_state=(jnp.ones(1), jnp.zeros(1)), optimizer=optax.adam(0.05),
        max_steps=300, progress=False,
    )  # fmt: skip
    assert float(result.params["w"]) == pytest.approx(1.5, rel=1e-3)
    assert result.loss_history.shape == (result.steps + 1,)


def test_bad_selections_are_named():
    kw = dict(ts=jnp.linspace(0, 1, 3), initial_state=(jnp.ones(2), jnp.zeros(2)))
    observe = lambda traj, p: traj.q  # noqa: E731
    with pytest.raises(ValueError, match=r"`fit` names \['mass'\]"):
        lx.fit(PENDULUM.system, PENDULUM.params, observe, None, fit=["mass"], **kw)
    with pytest.raises(ValueError, match="'g'.*must start > 0"):
        lx.fit(
            PENDULUM.system, {**PENDULUM.params, "g": -1.0}, observe, None,
            fit=["g"], positive=["g"], **kw,
        )  # fmt: skip


def test_multiple_shooting_input_errors_are_named():
    ts = jnp.linspace(0.0, 1.0, 5)
    kw = dict(ts=ts, initial_state=(jnp.ones(1), jnp.zeros(1)), progress=False)
    observe = lambda traj, p: traj.q[:, 0]  # noqa: E731
    data = jnp.ones(5)
    with pytest.raises(ValueError, match=r"segments=5 needs 2 <= segments <= len"):
        lx.fit(OSCILLATOR, {"k": 1.0, "c": 0.1}, observe, data, segments=5, **kw)
    with pytest.raises(ValueError, match="cannot be combined with optimizer="):
        lx.fit(
            OSCILLATOR, {"k": 1.0, "c": 0.1}, observe, data, segments=2,
            optimizer=optax.adam(0.1), **kw,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"states_guess must be \(q, qd\), each of "):
        lx.fit(
            OSCILLATOR, {"k": 1.0, "c": 0.1}, observe, data, segments=2,
            states_guess=(jnp.ones((4, 1)), jnp.ones((4, 1))), **kw,
        )  # fmt: skip
