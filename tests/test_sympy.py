"""`lx.from_sympy`: models written with sympy.physics.mechanics run through
lagrax, against the hand-written built-in and against SymPy's own equations of
motion (LagrangesMethod)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from sympy.physics import mechanics as me

import lagrax as lx


T = me.dynamicsymbols._t


def _double_pendulum_in_sympy():
    """The built-in non-minimal double pendulum (lx.systems.double_pendulum)
    written in SymPy: tips (x1, y1) and (x2, y2) relative to tip 1, links of
    mass m at their tips with central inertia m l^2 / 3, a torsion spring k,
    viscous friction c on the tip velocities."""
    x1, y1, x2, y2 = q = me.dynamicsymbols("x1 y1 x2 y2")
    m, l, g, k, c = sp.symbols("m l g k c", positive=True)
    v1 = sp.Matrix([x1.diff(T), y1.diff(T)])
    v2 = v1 + sp.Matrix([x2.diff(T), y2.diff(T)])
    w1 = (x1 * y1.diff(T) - y1 * x1.diff(T)) / (x1**2 + y1**2)
    w2 = (x2 * y2.diff(T) - y2 * x2.diff(T)) / (x2**2 + y2**2)
    kinetic = m * (v1.dot(v1) + v2.dot(v2)) / 2 + m * l**2 / 3 * (w1**2 + w2**2) / 2
    relative = sp.atan2(x1 * y2 - y1 * x2, x1 * x2 + y1 * y2)
    potential = m * g * (y1 + (y1 + y2)) + k * relative**2 / 2
    constraints = [x1**2 + y1**2 - l**2, x2**2 + y2**2 - l**2]
    # -c (v1 + v2) on (x1, y1) and -c v2 on (x2, y2): J_r^T f as the built-in.
    forces = [-c * (v1[0] + v2[0]), -c * (v1[1] + v2[1]), -c * v2[0], -c * v2[1]]
    return lx.from_sympy(kinetic - potential, q, constraints=constraints,
                         forces=forces)  # fmt: skip


BUILTIN = lx.systems.double_pendulum()
PARAMS = {**BUILTIN.params, "c": 0.3}


def _states(count, seed=0):
    """Consistent random states of the double pendulum."""
    rng = np.random.default_rng(seed)
    l = PARAMS["l"]
    for _ in range(count):
        a, b = rng.uniform(-np.pi, np.pi, 2)
        ra, rb = np.array([np.sin(a), -np.cos(a)]), np.array([np.sin(b), -np.cos(b)])
        wa, wb = rng.normal(size=2)
        q = l * np.concatenate([ra, rb])
        qd = l * np.concatenate([wa * np.array([-ra[1], ra[0]]),
                                 wb * np.array([-rb[1], rb[0]])])  # fmt: skip
        yield jnp.asarray(q), jnp.asarray(qd)


def test_sympy_double_pendulum_equals_the_builtin():
    system = _double_pendulum_in_sympy()
    ours = jax.jit(lambda q, qd, p: lx.accelerations(system, 0.0, q, qd, p))
    theirs = jax.jit(lambda q, qd, p: lx.accelerations(BUILTIN.system, 0.0, q, qd, p))
    for q, qd in _states(5):
        (a1, l1), (a2, l2) = ours(q, qd, PARAMS), theirs(q, qd, PARAMS)
        np.testing.assert_allclose(a1, a2, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(l1, l2, rtol=1e-12, atol=1e-12)
    # And runs through lagrax as the built-in does: 1 s of motion.
    q0, qd0 = BUILTIN.initial_state(PARAMS)
    kw = dict(t1=1.0, ts=jnp.linspace(0.0, 1.0, 5), rtol=1e-10, atol=1e-10)
    a = lx.simulate(system, q0, qd0, PARAMS, **kw)
    b = lx.simulate(BUILTIN.system, q0, qd0, PARAMS, **kw)
    np.testing.assert_allclose(a.q, b.q, atol=1e-9)
    np.testing.assert_allclose(a.multipliers, b.multipliers, atol=1e-7)
    # Differentiable as hand-written code: d qdd / d params equal.
    q, qd = next(_states(1, seed=3))
    d1 = jax.jacobian(lambda p: ours(q, qd, p)[0])(PARAMS)
    d2 = jax.jacobian(lambda p: theirs(q, qd, p)[0])(PARAMS)
    for key in PARAMS:
        np.testing.assert_allclose(d1[key], d2[key], rtol=1e-10, atol=1e-10)


def test_accelerations_equal_sympys_lagranges_method():
    """A double pendulum in its two angles (point masses, a damper on the
    second joint): SymPy's LagrangesMethod mass matrix and forcing, evaluated at
    random states, against lagrax's autodiff of the same Lagrangian."""
    th1, th2 = q = me.dynamicsymbols("theta1 theta2")
    m1, m2, l1, l2, g, c = sp.symbols("m1 m2 l1 l2 g c", positive=True)
    p1 = sp.Matrix([l1 * sp.sin(th1), -l1 * sp.cos(th1)])
    p2 = p1 + sp.Matrix([l2 * sp.sin(th2), -l2 * sp.cos(th2)])
    v1, v2 = p1.diff(T), p2.diff(T)
    lagrangian = (
        m1 * v1.dot(v1) / 2 + m2 * v2.dot(v2) / 2 - g * (m1 * p1[1] + m2 * p2[1])
    )
    damper = [c * (th2.diff(T) - th1.diff(T)), -c * (th2.diff(T) - th1.diff(T))]
    method = me.LagrangesMethod(lagrangian, q, forcelist=None)
    method.form_lagranges_equations()
    qd_syms = [qi.diff(T) for qi in q]
    mass = sp.lambdify([*q, *qd_syms, m1, m2, l1, l2, g], method.mass_matrix)
    forcing = sp.lambdify([*q, *qd_syms, m1, m2, l1, l2, g], method.forcing)
    system = lx.from_sympy(lagrangian, q, forces=damper)
    params = {"m1": 1.3, "m2": 0.7, "l1": 1.1, "l2": 0.8, "g": 9.81, "c": 0.4}
    acc = jax.jit(lambda q_, qd_: lx.accelerations(system, 0.0, q_, qd_, params)[0])
    rng = np.random.default_rng(4)
    for _ in range(5):
        qv, qdv = rng.uniform(-3, 3, 2), rng.normal(size=2)
        args = (*qv, *qdv, *(params[k] for k in ("m1", "m2", "l1", "l2", "g")))
        rhs = np.asarray(forcing(*args), float).ravel()
        # The damper's generalized force, added to SymPy's conservative forcing.
        rhs += params["c"] * (qdv[1] - qdv[0]) * np.array([1.0, -1.0])
        expected = np.linalg.solve(np.asarray(mass(*args), float), rhs)
        np.testing.assert_allclose(acc(jnp.asarray(qv), jnp.asarray(qdv)), expected,
                                   rtol=1e-12, atol=1e-12)  # fmt: skip


def test_parameters_map_to_keys_and_bad_input_is_named():
    x = me.dynamicsymbols("x")
    k, m = sp.symbols("k m")
    system = lx.from_sympy(m * x.diff(T) ** 2 / 2 - k * x**2 / 2, [x],
                           params={k: "stiffness"})  # fmt: skip
    qdd, _ = lx.accelerations(system, 0.0, jnp.array([0.5]), jnp.array([0.0]),
                              {"stiffness": 4.0, "m": 2.0})  # fmt: skip
    np.testing.assert_allclose(qdd, [-1.0])  # -k x / m
    with pytest.raises(KeyError, match="params has no 'stiffness'"):
        lx.accelerations(system, 0.0, jnp.array([0.5]), jnp.array([0.0]), {"m": 2.0})
    with pytest.raises(ValueError, match="neither a coordinate"):
        lx.from_sympy(x.diff(T, 2) * x, [x])
    with pytest.raises(ValueError, match="one expression per coordinate"):
        lx.from_sympy(x.diff(T) ** 2, [x], forces=[x, x])
