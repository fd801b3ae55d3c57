"""Mass-matrix structure found at trace time, and the fast path it selects."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax._structure import constant_diagonal_mass


def chain(N):
    """N unit point masses on unit rods in Cartesian coordinates: M = m I."""

    def lagrangian(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * 9.81 * jnp.sum(q[1::2])

    def constraints(t, q, p):
        r = q.reshape(-1, 2)
        links = jnp.diff(r, axis=0, prepend=jnp.zeros((1, 2), q.dtype))
        return jnp.sum(links**2, axis=1) - 1.0

    angles = 0.3 + 0.2 * np.arange(N)
    q0 = np.cumsum(np.stack([np.sin(angles), -np.cos(angles)], axis=1), axis=0)
    return lx.System(lagrangian, constraints), jnp.asarray(q0.ravel())


def is_diagonal(system, q, params):
    return constant_diagonal_mass(
        system, jnp.asarray(0.0), q, jnp.zeros_like(q), params
    )


def test_detects_point_masses_and_not_the_rest():
    system, q0 = chain(3)
    assert is_diagonal(system, q0, {"m": jnp.asarray(1.0)})
    for name, expected in [("car_axis", True), ("double_pendulum", False),
                           ("andrews", False)]:  # fmt: skip
        model = getattr(lx.systems, name)()
        q, qd = model.initial_state(model.params)
        assert is_diagonal(model.system, q, model.params) is expected, name


def lagrangian_with(kinetic):
    return lx.System(lambda t, q, qd, p: kinetic(q, qd, p) - 9.81 * q[1])


@pytest.mark.parametrize(
    "kinetic",
    [
        # A branch on the state: diagonal at some states only.
        lambda q, qd, p: jnp.where(qd[0] > 0, 0.5 * qd @ qd, qd[0] * qd[1] + qd @ qd),
        # Diagonal but depending on q.
        lambda q, qd, p: 0.5 * (1 + q[0] ** 2) * qd @ qd,
        # Constant, with a coupling given by a parameter.
        lambda q, qd, p: 0.5 * qd @ qd + p["c"] * qd[0] * qd[1],
    ],
    ids=["branch-on-state", "state-dependent", "coupling-parameter"],
)
def test_anything_else_counts_as_dense(kinetic):
    q = jnp.array([0.3, -0.2])
    assert not is_diagonal(lagrangian_with(kinetic), q, {"c": jnp.asarray(0.1)})


def test_closure_over_a_traced_value_counts_as_dense():
    q = jnp.array([0.3, -0.2])

    @jax.jit
    def decide(m):
        system = lagrangian_with(lambda q, qd, p: 0.5 * m * qd @ qd)
        return jnp.asarray(is_diagonal(system, q, {}))

    assert not decide(1.0)


@pytest.fixture(scope="module")
def chain3():
    return chain(3)


def test_fast_path_matches_the_dense_solve_with_derivatives(chain3):
    system, q0 = chain3
    qd0 = 0.1 * jnp.arange(6.0)
    params = {"m": jnp.asarray(1.3)}
    dense = lx.SchurCholesky(detect_structure=False)

    def final(m, saddle_solver):
        sol = lx.simulate(system, q0, qd0, {"m": m}, t1=0.5, rtol=1e-10,
                          atol=1e-10, saddle_solver=saddle_solver,
                          project_initial=True,
                          adjoint=dfx.ForwardMode())  # fmt: skip
        out = sol.q[-1], sol.multipliers[-1]
        return out, out

    def jacobian_and_value(saddle_solver):
        # One compiled program each, the value as its aux. Forward mode: one
        # tangent for the one parameter (reverse mode through the fast path is
        # checked on the pendulum, M = m I, in test_gradients.py).
        jac = jax.jacfwd(lambda m: final(m, saddle_solver), has_aux=True)
        return jax.jit(jac)(jnp.asarray(1.3))

    for a, b in zip(
        lx.accelerations(system, 0.0, q0, qd0, params),
        lx.accelerations(system, 0.0, q0, qd0, params, saddle_solver=dense),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # The multipliers of point masses scale with m, the motion not at all.
    fast, value = jacobian_and_value(lx.SchurCholesky())
    slow, _ = jacobian_and_value(dense)
    np.testing.assert_allclose(fast[0], 0.0, atol=1e-7)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-8)
    np.testing.assert_allclose(fast[1], value[1] / 1.3, rtol=1e-6)
