"""Gradients through whole trajectories against central finite differences."""

import functools

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


TS = jnp.linspace(0.0, 1.0, 5)
TOL = dict(rtol=1e-12, atol=1e-12)


def loss_of(model, **kwargs):
    """A scalar of the whole trajectory: positions, velocities and forces."""

    # The finite differences step off the constraints in q0 and qd0 on purpose:
    # the derivative is checked in every direction, so the consistency check
    # of the start is off.
    kwargs = {"initial_tol": float("inf"), **kwargs}

    def loss(params, q0, qd0):
        sol = lx.simulate(model.system, q0, qd0, params, t1=1.0, ts=TS, **TOL, **kwargs)
        return (
            jnp.sum(jnp.sin(sol.q)) + 0.1 * jnp.sum(sol.qd**2)
            + 1e-3 * jnp.sum(sol.multipliers**2)
        )  # fmt: skip

    return loss


@functools.cache
def value_and_grad(loss, nargs):
    """jit(value_and_grad(loss)), compiled once per loss and shared by the tests."""
    return jax.jit(jax.value_and_grad(loss, argnums=tuple(range(nargs))))


def directional_check(loss, args, seed=0, h=1e-6, rtol=1e-5):
    """grad(loss) . v against (loss(x + h v) - loss(x - h v)) / 2h, v random."""
    rng = np.random.default_rng(seed)
    # Strongly typed, as the shifted arguments are: one compile serves all calls.
    args = jax.tree.map(lambda x: jnp.array(x, dtype=jnp.asarray(x).dtype), args)
    direction = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=np.shape(x))), args)
    # One program for the gradient and the values: the differences take the
    # value it returns (the same forward solve), which saves compiling the loss
    # alone.
    f = value_and_grad(loss, len(args))
    _, grads = f(*args)
    assert all(jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads))
    ad = sum(
        jnp.vdot(g, v)
        for g, v in zip(jax.tree.leaves(grads), jax.tree.leaves(direction), strict=True)
    )

    def shifted(sign):
        return f(*jax.tree.map(lambda x, v: x + sign * h * v, args, direction))[0]

    fd = (shifted(1.0) - shifted(-1.0)) / (2 * h)
    assert float(ad) == pytest.approx(float(fd), rel=rtol, abs=1e-7)


def _arrays(params):
    # Strongly typed float64 (jnp.asarray of a Python float is weakly typed).
    return {k: jnp.asarray(v, dtype=float) for k, v in params.items()}


PENDULUM = lx.systems.pendulum()
# Built once, so that tests with the same loss share its compiled gradient.
STABILIZATIONS = {
    "none": loss_of(PENDULUM, stabilization=lx.NoStabilization()),
    "baumgarte": loss_of(PENDULUM, stabilization=lx.Baumgarte(5.0, 5.0)),
    "projection": loss_of(PENDULUM, stabilization=lx.Projection()),
}


@pytest.fixture(scope="module")
def pendulum_args():
    q0 = jnp.array([2.5 * np.sin(2.0), -2.5 * np.cos(2.0)])
    return _arrays(PENDULUM.params), q0, jnp.zeros(2)


@pytest.mark.parametrize("stabilization", STABILIZATIONS)
def test_each_stabilization(pendulum_args, stabilization):
    directional_check(STABILIZATIONS[stabilization], pendulum_args)


@pytest.mark.parametrize(
    "saddle_solver", [lx.DenseLU(), lx.LeastSquares()], ids=["lu", "lstsq"]
)
def test_each_saddle_solver(pendulum_args, saddle_solver):
    directional_check(loss_of(PENDULUM, saddle_solver=saddle_solver), pendulum_args)


def test_slider_pendulum_through_its_initial_state():
    """The consistent start depends on the parameters (the bar length): the
    gradient flows through consistent_state by the implicit function theorem."""
    model = lx.systems.slider_pendulum()
    simulate = loss_of(model)

    def loss(params):
        q0, qd0 = model.initial_state(params)
        return simulate(params, q0, qd0)

    # h = 1e-4: adaptive steps and the Newton solves make the loss noisy at 1e-11.
    directional_check(loss, (_arrays(model.params),), seed=1, h=1e-4)


def test_double_pendulum():
    model = lx.systems.double_pendulum()
    q0, qd0 = model.initial_state()
    params = _arrays({**model.params, "c": 0.2})
    stabilization = lx.Baumgarte(5.0, 5.0)  # projection is covered above
    directional_check(
        loss_of(model, stabilization=stabilization), (params, q0, qd0), seed=2
    )


def test_forward_mode_with_the_forward_adjoint(pendulum_args):
    params, q0, qd0 = pendulum_args

    def final_state(q0):
        sol = lx.simulate(
            PENDULUM.system, q0, qd0, params, t1=1.0, adjoint=dfx.ForwardMode(),
            initial_tol=float("inf"), **TOL,
        )  # fmt: skip
        return sol.q[-1], sol.q[-1]

    # One program for the Jacobian and the value (its primal output, returned as
    # aux): the differences take the value from it.
    jac_and_value = jax.jit(jax.jacfwd(final_state, has_aux=True))
    jac_fwd, _ = jac_and_value(q0)
    h = 1e-6
    columns = [
        (jac_and_value(q0 + h * e)[1] - jac_and_value(q0 - h * e)[1]) / (2 * h)
        for e in jnp.eye(2)
    ]
    np.testing.assert_allclose(jac_fwd, jnp.stack(columns, axis=1), rtol=1e-5)


def test_vmap_of_grad_equals_loop(pendulum_args):
    params, q0, qd0 = pendulum_args
    # The jitted gradient of test_each_stabilization[projection] (the default).
    vg = value_and_grad(STABILIZATIONS["projection"], 3)

    def grad_g(g):
        return vg({**params, "g": g}, q0, qd0)[1][0]["g"]

    gs = jnp.array([9.0, 9.81, 11.0])
    np.testing.assert_allclose(
        jax.vmap(grad_g)(gs), [grad_g(g) for g in gs], rtol=1e-10
    )
