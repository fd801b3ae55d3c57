"""lx.fit: parameters recovered from synthetic observations."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lagrax as lx


PENDULUM = lx.systems.pendulum()


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
