"""Controls: interpolation, bounds, and gradients with respect to their values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


@pytest.mark.parametrize("cls", [lx.PiecewiseLinear, lx.CubicSpline])
def test_controls_pass_through_their_values(cls):
    control = cls(0.0, 2.0, num_knots=5)
    values = jnp.array([0.0, 1.0, -1.0, 2.0, 0.5])
    at_knots = jax.vmap(lambda t: control(t, values))(control.knots)
    np.testing.assert_allclose(at_knots, values, atol=1e-12)
    assert float(control(-1.0, values)) == 0.0 and float(control(9.0, values)) == 0.5
    two = jnp.stack([values, 2 * values], axis=1)  # two inputs
    np.testing.assert_allclose(control(1.0, two), [-1.0, -2.0], atol=1e-12)


def test_piecewise_linear_between_knots():
    control = lx.PiecewiseLinear(0.0, 1.0, num_knots=3)
    assert float(control(0.25, jnp.array([0.0, 2.0, 0.0]))) == pytest.approx(1.0)


def test_wrong_number_of_values_is_named():
    with pytest.raises(ValueError, match="expected 4 values"):
        lx.PiecewiseLinear(0.0, 1.0, 4)(0.5, jnp.zeros(3))


def test_saturate_bounds_and_is_identity_near_zero():
    u = jnp.array([-100.0, -1e-3, 0.0, 1e-3, 100.0])
    out = lx.saturate(u, 5.0)
    assert float(jnp.abs(out).max()) <= 5.0
    assert float(lx.saturate(10.0, 5.0)) == pytest.approx(5.0 * np.tanh(2.0))
    np.testing.assert_allclose(out[1:4], u[1:4], rtol=1e-6)


def test_gradient_with_respect_to_control_values():
    """A unit mass pushed by u(t): x(T) = integral of (T - t) u(t) dt, linear in
    the values, so its gradient is exact and known. Stepping to the knots
    (step_ts) keeps the kinks of the control out of the steps: without it the
    steps chosen for u = 0 would straddle them."""
    control = lx.PiecewiseLinear(0.0, 1.0, num_knots=3)

    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd

    def forces(t, q, qd, p):
        return control(t, p["u"])[None]

    system = lx.System(lagrangian, forces=forces)

    def final_x(u):
        sol = lx.simulate(
            system, jnp.zeros(1), jnp.zeros(1), {"u": u}, t1=1.0, step_ts=control.knots
        )
        return sol.q[-1, 0]

    # Hat functions on [0, 1] with knots 0, 0.5, 1 against the weight (1 - t).
    expected = [5 / 24, 1 / 4, 1 / 24]
    grad = jax.jit(jax.grad(final_x))(jnp.zeros(3))  # jitted: one program
    np.testing.assert_allclose(grad, expected, rtol=1e-7)
