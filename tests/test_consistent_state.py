"""consistent_state: Newton projection onto the constraints, keeping fixed coords."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


PENDULUM = lx.systems.pendulum()
SLIDER = lx.systems.slider_pendulum()
DOUBLE = lx.systems.double_pendulum()


def test_pendulum_guess_is_projected_radially():
    guess = np.array([3.0, -1.0])
    q, qd = lx.consistent_state(PENDULUM.system, guess, [0.5, 0.5], PENDULUM.params)
    l = PENDULUM.params["l"]
    np.testing.assert_allclose(q, l * guess / np.linalg.norm(guess), rtol=1e-14)
    # The velocity keeps its tangential part only.
    tangent = np.array([1.0, 3.0]) / np.sqrt(10.0)
    np.testing.assert_allclose(qd, (tangent @ [0.5, 0.5]) * tangent, atol=1e-15)


def test_slider_from_a_rough_guess_with_fixed_coordinates():
    h = SLIDER.params["L"] / 2
    x1, th2 = 0.07, 0.6
    guess = [x1, 0.3, -0.4, 1.0, 1.0, th2]
    q, qd = lx.consistent_state(
        SLIDER.system,
        guess,
        [0.2, 0.1, 0.0, 0.0, 0.0, 1.5],
        SLIDER.params,
        fixed_q=[0, 5],
        fixed_qd=[0, 5],
    )
    expected = [x1, 0.0, 0.0, x1 + h * np.cos(th2), h * np.sin(th2), th2]
    np.testing.assert_allclose(q, expected, atol=1e-14)
    # Velocities follow from x1' = 0.2 and th2' = 1.5.
    expected_qd = [0.2, 0, 0, 0.2 - h * np.sin(th2) * 1.5, h * np.cos(th2) * 1.5, 1.5]
    np.testing.assert_allclose(qd, expected_qd, atol=1e-14)


def test_boolean_mask_equals_indices():
    mask = np.array([True, False, False, False, False, True])
    by_mask = lx.consistent_state(
        SLIDER.system,
        [0.1, 0.2, 0.0, 0.3, 0.1, 0.2],
        np.zeros(6),
        SLIDER.params,
        fixed_q=mask,
    )
    by_index = lx.consistent_state(
        SLIDER.system,
        [0.1, 0.2, 0.0, 0.3, 0.1, 0.2],
        np.zeros(6),
        SLIDER.params,
        fixed_q=[0, 5],
    )
    np.testing.assert_allclose(by_mask[0], by_index[0], atol=1e-15)


def test_fixed_velocity_is_kept():
    q0, _ = DOUBLE.initial_state()
    qd = jnp.array([0.3, 0.8, -1.0, 2.0])
    q, qd_new = lx.consistent_state(DOUBLE.system, q0, qd, DOUBLE.params, fixed_qd=[0])
    assert float(qd_new[0]) == 0.3
    jac = jax.jacfwd(lambda x: DOUBLE.system.constraints(0.0, x, DOUBLE.params))(q)
    np.testing.assert_allclose(jac @ qd_new, 0.0, atol=1e-13)


def test_impossible_request_names_the_residual():
    # With x fixed beyond the rod length, no y satisfies x^2 + y^2 = l^2.
    with pytest.raises(ValueError, match=r"did not converge.*max \|phi\| = "):
        lx.consistent_state(
            PENDULUM.system, [3.0, 0.1], [0.0, 0.0], PENDULUM.params, fixed_q=[0]
        )


def test_bad_fixed_indices_are_rejected():
    with pytest.raises(ValueError, match="fixed_q.*out of range"):
        lx.consistent_state(
            PENDULUM.system, [3.0, 0.1], [0.0, 0.0], PENDULUM.params, fixed_q=[2]
        )


def test_works_under_jit():
    f = jax.jit(
        lambda q: lx.consistent_state(
            PENDULUM.system, q, jnp.zeros(2), PENDULUM.params
        )[0]
    )
    q = f(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(q @ q, PENDULUM.params["l"] ** 2, rtol=1e-14)


def test_derivatives_by_the_implicit_function_theorem():
    """Radial projection q* = l q / |q|: its Jacobian is known in closed form."""
    l = PENDULUM.params["l"]

    def project(q, length):
        params = {**PENDULUM.params, "l": length}
        return lx.consistent_state(PENDULUM.system, q, jnp.zeros(2), params)[0]

    @jax.jit  # one program for the three Jacobians
    def jacobians(q, length):
        return (
            jax.jacfwd(project)(q, length),
            jax.jacrev(project)(q, length),
            jax.jacrev(project, argnums=1)(q, length),
        )

    q = jnp.array([3.0, -1.0])
    r = float(jnp.linalg.norm(q))
    expected = l / r * (np.eye(2) - np.outer(q, q) / r**2)
    forward, reverse, d_length = jacobians(q, l)
    np.testing.assert_allclose(forward, expected, atol=1e-12)
    np.testing.assert_allclose(reverse, expected, atol=1e-12)
    np.testing.assert_allclose(d_length, q / r, atol=1e-12)


def test_derivatives_keep_the_fixed_coordinates():
    h = SLIDER.params["L"] / 2
    guess = jnp.array([0.07, 0.3, -0.4, 1.0, 1.0, 0.6])

    def start(guess, length):
        params = {**SLIDER.params, "L": length}
        return lx.consistent_state(
            SLIDER.system, guess, jnp.zeros(6), params, fixed_q=[0, 5]
        )[0]

    @jax.jit  # one program for both Jacobians
    def jacobians(guess, length):
        by_guess = jax.jacrev(start)(guess, length)
        return by_guess, jax.jacfwd(start, argnums=1)(guess, length)

    jac, d_length = jacobians(guess, 2 * h)
    # x2 = x1 + h cos(th2), y2 = h sin(th2): only the fixed coordinates matter.
    expected = np.zeros((6, 6))
    expected[0, 0] = expected[5, 5] = expected[3, 0] = 1.0
    expected[3, 5] = -h * np.sin(0.6)
    expected[4, 5] = h * np.cos(0.6)
    np.testing.assert_allclose(jac, expected, atol=1e-12)
    np.testing.assert_allclose(
        d_length, [0, 0, 0, 0.5 * np.cos(0.6), 0.5 * np.sin(0.6), 0], atol=1e-12
    )
