"""simulate as an API: caching, jit/vmap/grad, saving, errors, solvers."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


MODEL = lx.systems.pendulum()
P = MODEL.params


def _start(theta=0.4, l=P["l"]):
    return jnp.array([l * np.sin(theta), -l * np.cos(theta)]), jnp.zeros(2)


TRACES = {"lagrangian": 0}


def counting_lagrangian(t, q, qd, p):
    TRACES["lagrangian"] += 1  # runs only while JAX traces
    return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * q[1]


def circle(t, q, p):
    return jnp.stack([q @ q - p["l"] ** 2])


COUNTED = lx.System(counting_lagrangian, circle)


def test_second_call_does_not_retrace():
    ts = jnp.linspace(0.0, 1.0, 11)
    q0, qd0 = _start(0.3)
    lx.simulate(COUNTED, q0, qd0, P, t1=1.0, ts=ts)
    traced = TRACES["lagrangian"]
    assert traced > 0
    # New values of every array input, same shapes: the compiled solve is reused.
    q1, qd1 = _start(0.5)
    params = {"m": 3.0, "l": 2.5, "g": 9.0}
    sol = lx.simulate(COUNTED, q1, qd1, params, t1=2.0, ts=2 * ts, rtol=1e-7)
    assert TRACES["lagrangian"] == traced
    assert sol.ts[-1] == 2.0
    # Parameters as arrays rather than Python floats (weakly typed): the same.
    arrays = {k: jnp.asarray(v, dtype=float) for k, v in params.items()}
    again = lx.simulate(COUNTED, q1, qd1, arrays, t1=2.0, ts=2 * ts, rtol=1e-7)
    assert TRACES["lagrangian"] == traced
    np.testing.assert_array_equal(again.q, sol.q)
    for fn in (lx.consistent_state, lx.accelerations):
        args = (q1, qd1) if fn is lx.consistent_state else (0.0, q1, qd1)
        first = fn(COUNTED, *args, params)
        traced = TRACES["lagrangian"]
        np.testing.assert_array_equal(fn(COUNTED, *args, arrays)[0], first[0])
        assert TRACES["lagrangian"] == traced, fn.__name__


def test_default_saves_t0_and_t1():
    q0, qd0 = _start()
    sol = lx.simulate(MODEL.system, q0, qd0, P, t0=0.5, t1=1.5)
    np.testing.assert_array_equal(sol.ts, [0.5, 1.5])
    assert sol.q.shape == (2, 2) and sol.multipliers.shape == (2, 1)
    assert sol.energy.shape == (2,)
    np.testing.assert_allclose(sol.q[0], q0)


@pytest.fixture(scope="module")
def final_x():
    """x(t1) as a jitted function of (theta0, params)."""

    @jax.jit
    def f(theta, params):
        q0 = params["l"] * jnp.stack([jnp.sin(theta), -jnp.cos(theta)])
        sol = lx.simulate(
            MODEL.system, q0, jnp.zeros(2), params, t1=1.0, rtol=1e-10, atol=1e-10
        )
        return sol.q[-1, 0]

    return f


@pytest.fixture(scope="module")
def grad_final_x(final_x):
    """The gradient of final_x, jitted: one program, shared by the tests."""
    return jax.jit(jax.grad(final_x, argnums=(0, 1)))


def test_jit_matches_eager(final_x):
    q0, qd0 = _start(0.4)
    eager = lx.simulate(MODEL.system, q0, qd0, P, t1=1.0, rtol=1e-10, atol=1e-10)
    assert float(final_x(0.4, P)) == pytest.approx(float(eager.q[-1, 0]), abs=1e-12)


def test_vmap_equals_loop(final_x):
    thetas = [0.1, 0.5, 1.0]
    batched = jax.vmap(final_x, in_axes=(0, None))(jnp.array(thetas), P)
    # Python floats, as in test_jit_matches_eager: the same compiled program.
    looped = jnp.stack([final_x(th, P) for th in thetas])
    np.testing.assert_allclose(batched, looped, atol=1e-12)


def test_grad_matches_finite_differences(final_x, grad_final_x):
    grad = grad_final_x(0.4, P)
    h = 1e-5
    fd_theta = (final_x(0.4 + h, P) - final_x(0.4 - h, P)) / (2 * h)
    assert float(grad[0]) == pytest.approx(float(fd_theta), rel=1e-5)
    for key in ("g", "l"):
        up, down = {**P, key: P[key] + h}, {**P, key: P[key] - h}
        fd = (final_x(0.4, up) - final_x(0.4, down)) / (2 * h)
        assert float(grad[1][key]) == pytest.approx(float(fd), rel=1e-5)
    assert float(grad[1]["m"]) == pytest.approx(0.0, abs=1e-9)  # mass cancels


def test_unconstrained_harmonic_oscillator():
    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd - 0.5 * p["w"] ** 2 * q @ q

    ts = jnp.linspace(0.0, 3.0, 7)
    sol = lx.simulate(
        lx.System(lagrangian),
        jnp.array([1.0, 0.0]),
        jnp.array([0.0, 2.0]),
        {"w": 2.0},
        t1=3.0,
        ts=ts,
        rtol=1e-11,
        atol=1e-11,
    )
    np.testing.assert_allclose(sol.q[:, 0], np.cos(2 * ts), atol=1e-9)
    np.testing.assert_allclose(sol.q[:, 1], np.sin(2 * ts), atol=1e-9)
    assert sol.multipliers.shape == (7, 0) and sol.phi.shape == (7, 0)


@pytest.mark.parametrize(
    "solver", [dfx.Tsit5(), dfx.Kvaerno5()], ids=["explicit", "implicit"]
)
def test_other_diffrax_solvers(solver):
    q0, qd0 = _start(1.0)
    sol = lx.simulate(MODEL.system, q0, qd0, P, t1=2.0, solver=solver)
    reference = lx.simulate(MODEL.system, q0, qd0, P, t1=2.0, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(sol.q[-1], reference.q[-1], atol=1e-6)


def test_fixed_steps():
    q0, qd0 = _start(1.0)
    sol = lx.simulate(
        MODEL.system,
        q0,
        qd0,
        P,
        t1=2.0,
        solver=dfx.Tsit5(),
        stepsize_controller=dfx.ConstantStepSize(),
        dt0=0.01,
    )
    assert int(sol.stats["num_steps"]) == 200
    assert np.abs(np.asarray(sol.phi)).max() < 1e-12


def test_rk4_is_the_classical_method_with_fixed_steps():
    """lx.RK4 on the harmonic oscillator y' = A y: each step multiplies y by
    the degree-4 Taylor polynomial of exp(h A), exactly the classical method,
    and between steps y is its continuous extension y0 + sum_i b_i(theta) k_i
    (Hairer, Norsett & Wanner, II.6). Without a step-size controller it takes
    fixed steps of dt0; without dt0, with an adaptive controller, or with
    step_ts it is refused (it has no error estimate), but HalfSolver gives it
    one."""
    w, h, steps, theta = 2.0, 0.1, 30, 0.37
    system = lx.System(lambda t, q, qd, p: 0.5 * qd @ qd - 0.5 * p["w"] ** 2 * q @ q)
    y0, p = np.array([1.0, 0.5]), {"w": w}
    ts = jnp.array([0.0, theta * h, steps * h])
    sol = lx.simulate(system, y0[:1], y0[1:], p, t1=steps * h, ts=ts,
                      solver=lx.RK4(), dt0=h)  # fmt: skip
    z = h * np.array([[0.0, 1.0], [-(w**2), 0.0]])
    step = np.eye(2) + z + z @ z / 2 + z @ z @ z / 6 + z @ z @ z @ z / 24
    y = np.linalg.matrix_power(step, steps) @ y0
    assert int(sol.stats["num_steps"]) == steps
    np.testing.assert_allclose([sol.q[-1, 0], sol.qd[-1, 0]], y, rtol=0, atol=1e-14)
    k1 = z @ y0
    k2 = z @ (y0 + k1 / 2)
    k3 = z @ (y0 + k2 / 2)
    k4 = z @ (y0 + k3)
    b1 = theta - 3 * theta**2 / 2 + 2 * theta**3 / 3
    b2 = theta**2 - 2 * theta**3 / 3
    b4 = -(theta**2) / 2 + 2 * theta**3 / 3
    inside = y0 + b1 * k1 + b2 * (k2 + k3) + b4 * k4
    np.testing.assert_allclose([sol.q[1, 0], sol.qd[1, 0]], inside, atol=1e-15)

    def run(**kwargs):
        return lx.simulate(system, jnp.ones(1), jnp.zeros(1), p, t1=1.0, **kwargs)

    with pytest.raises(ValueError, match="simulate: solver RK4 .* give dt0"):
        run(solver=lx.RK4())
    with pytest.raises(RuntimeError, match="does not provide error estimates"):
        run(solver=lx.RK4(), dt0=h,
            stepsize_controller=dfx.PIDController(rtol=1e-6, atol=1e-6))  # fmt: skip
    with pytest.raises(ValueError, match="simulate: step_ts and jump_ts need adapt"):
        run(solver=lx.RK4(), dt0=h, step_ts=jnp.array([0.5]))
    halved = run(solver=dfx.HalfSolver(lx.RK4()), rtol=1e-8, atol=1e-8)
    assert float(halved.q[-1, 0]) == pytest.approx(np.cos(w), abs=1e-7)


def test_max_steps_is_reported_or_raised():
    q0, qd0 = _start(1.0)
    sol = lx.simulate(MODEL.system, q0, qd0, P, t1=10.0, max_steps=5, throw=False)
    assert sol.result == lx.RESULTS.max_steps
    assert float(sol.ts[-1]) < 10.0  # the state where it stopped
    with pytest.raises(Exception, match="raise max_steps"):
        lx.simulate(MODEL.system, q0, qd0, P, t1=10.0, max_steps=5)


def test_progress_bar(capsys):
    q0, qd0 = _start(1.0)
    sol = lx.simulate(MODEL.system, q0, qd0, P, t1=1.0, progress=True)
    assert sol.result == lx.RESULTS.successful
    assert "100.00%" in capsys.readouterr().err


def test_float32_warns_when_tolerance_is_too_tight():
    q0, qd0 = _start(0.4)
    with pytest.warns(UserWarning, match="tighter than float32"):
        sol = lx.simulate(
            MODEL.system,
            q0.astype(jnp.float32),
            qd0.astype(jnp.float32),
            P,
            t1=0.5,
            rtol=1e-9,
            atol=1e-9,
            max_steps=100_000,
        )
    assert sol.q.dtype == jnp.float32


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="same length"):
        lx.simulate(MODEL.system, jnp.zeros(2), jnp.zeros(3), P, t1=1.0)

    def vector_lagrangian(t, q, qd, p):
        return 0.5 * qd * qd

    with pytest.raises(ValueError, match="vector_lagrangian.*scalar"):
        lx.simulate(lx.System(vector_lagrangian), jnp.zeros(2), jnp.zeros(2), P, t1=1.0)

    def scalar_constraint(t, q, p):
        return q @ q - 1.0

    with pytest.raises(ValueError, match="scalar_constraint.*1-D"):
        lx.simulate(
            lx.System(MODEL.system.lagrangian, scalar_constraint),
            jnp.array([1.0, 0.0]),
            jnp.zeros(2),
            P,
            t1=1.0,
        )


@pytest.mark.parametrize(
    "adjoint",
    [dfx.DirectAdjoint(), dfx.BacksolveAdjoint()],
    ids=["direct", "backsolve"],
)
def test_adjoints_through_the_projection_wrapper(adjoint, grad_final_x):
    @jax.jit
    @jax.grad
    def d_final_x(g):
        # final_x at theta = 0.4, with another adjoint.
        q0 = P["l"] * jnp.stack([jnp.sin(0.4), -jnp.cos(0.4)])
        sol = lx.simulate(
            MODEL.system, q0, jnp.zeros(2), {**P, "g": g}, t1=1.0, rtol=1e-10,
            atol=1e-10, adjoint=adjoint, stabilization=lx.Projection(),
        )  # fmt: skip
        return sol.q[-1, 0]

    # The default adjoint (recursive checkpointing), compiled once for the module.
    reference = grad_final_x(0.4, P)[1]["g"]
    assert float(d_final_x(P["g"])) == pytest.approx(float(reference), rel=1e-6)


def test_event_stops_at_the_crossing():
    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd - 0.5 * p["w"] ** 2 * q @ q

    def crossing(t, q, qd, p):
        return q[0]

    sol = lx.simulate(
        lx.System(lagrangian), jnp.ones(1), jnp.zeros(1), {"w": 2.0}, t1=10.0,
        event=crossing, rtol=1e-12, atol=1e-12,
    )  # fmt: skip
    assert float(sol.ts[-1]) == pytest.approx(np.pi / 4, rel=1e-10)
    assert sol.result == lx.RESULTS.event_occurred  # and no error was raised
