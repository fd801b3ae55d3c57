"""The mechanism library against minimal-coordinate equations solved by scipy.

Each reference is written here without lagrax: closed-form position analysis,
the kinetic energy of the moving bodies, and the Euler-Lagrange equation in the
minimal coordinates (derivatives of the closed forms by 4th-order central
differences where they would be long by hand), integrated by DOP853.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax.systems.top import TOP, symmetry_axis

from .helpers import solve_reference


def _d(f, x, h=1e-3):
    """4th-order central difference of f at x."""
    return (f(x - 2 * h) - 8 * f(x - h) + 8 * f(x + h) - f(x + 2 * h)) / (12 * h)


def one_dof_rhs(pose, masses, inertias, gravity, torque):
    """theta'' of a one-degree-of-freedom mechanism from the poses of its bodies.

    pose(theta) -> (k, 3) rows (x, y, angle) of each body's mass centre;
    M(theta) = sum m |dr/dtheta|^2 + I (dphi/dtheta)^2, V = sum m g y, and
    M theta'' + M'(theta) theta'^2 / 2 + V'(theta) = Q(t, theta, theta').
    """
    masses, inertias = np.asarray(masses), np.asarray(inertias)

    def mass(th):
        d = _d(pose, th)
        return np.sum(masses * (d[:, 0] ** 2 + d[:, 1] ** 2) + inertias * d[:, 2] ** 2)

    def potential(th):
        return gravity * np.sum(masses * pose(th)[:, 1])

    def rhs(t, y):
        th, w = y
        q = torque(t, th, w, lambda f: _d(f, th))
        return [w, (q - 0.5 * _d(mass, th) * w**2 - _d(potential, th)) / mass(th)]

    return rhs


def simulate(model, q0, qd0, t1, n=21, **kw):
    ts = jnp.linspace(0.0, t1, n)
    sol = lx.simulate(
        model.system, q0, qd0, model.params, t1=t1, ts=ts, rtol=1e-11, atol=1e-11,
        stabilization=lx.Projection(), **kw,
    )  # fmt: skip
    return np.asarray(ts), sol


def test_four_bar_against_its_crank_angle_equation():
    model = lx.systems.four_bar()
    p = model.params
    a, b, c, d = p["a"], p["b"], p["c"], p["d"]

    def pose(th):
        # Law of cosines on the diagonal from A = a e^{i th} to O4 = (d, 0).
        ax, ay = a * math.cos(th), a * math.sin(th)
        diag = math.hypot(d - ax, ay)
        to_o4 = math.atan2(-ay, d - ax)
        gamma = math.acos((b**2 + diag**2 - c**2) / (2 * b * diag))
        th3 = to_o4 + gamma  # open branch: B above the diagonal
        bx, by = ax + b * math.cos(th3), ay + b * math.sin(th3)
        th4 = math.atan2(by, bx - d)
        return np.array([
            [ax / 2, ay / 2, th],
            [(ax + bx) / 2, (ay + by) / 2, th3],
            [(d + bx) / 2, by / 2, th4],
        ])  # fmt: skip

    masses = [p["m1"], p["m2"], p["m3"]]
    inertias = [p["m1"] * a**2 / 12, p["m2"] * b**2 / 12, p["m3"] * c**2 / 12]
    rhs = one_dof_rhs(pose, masses, inertias, p["g"], lambda *_: 0.0)
    q0, qd0 = model.initial_state()
    # The model's start is the reference's pose on the same branch.
    np.testing.assert_allclose(
        np.asarray(q0).reshape(3, 3), pose(float(q0[2])), atol=1e-12
    )
    ts, sol = simulate(model, q0, qd0, 1.5)
    ref = solve_reference(
        rhs, [float(q0[2]), float(qd0[2])], ts, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(sol.q[:, 2], ref[:, 0], atol=2e-8)
    np.testing.assert_allclose(sol.qd[:, 2], ref[:, 1], atol=2e-7)
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-9)


def test_slider_crank_with_a_motor_against_minimal_coordinates():
    model = lx.systems.slider_crank()
    p = model.params
    r, l = p["r"], p["l"]

    def pose(th):
        beta = -math.asin(r * math.sin(th) / l)
        px, py = r * math.cos(th), r * math.sin(th)
        x = px + l * math.cos(beta)
        return np.array([
            [px / 2, py / 2, th],
            [px + l / 2 * math.cos(beta), py + l / 2 * math.sin(beta), beta],
            [x, 0.0, 0.0],
        ])  # fmt: skip

    def torque(t, th, w, d):
        dx = d(lambda s: pose(s)[2, 0])  # the piston's velocity ratio
        return p["tau0"] * (1 - w / p["omega0"]) - p["c"] * dx * w * dx

    masses = [p["m1"], p["m2"], p["m3"]]
    inertias = [p["m1"] * r**2 / 12, p["m2"] * l**2 / 12, 0.0]
    rhs = one_dof_rhs(pose, masses, inertias, 0.0, torque)
    q0, qd0 = model.initial_state()
    ts, sol = simulate(model, q0, qd0, 1.0)
    ref = solve_reference(rhs, [float(q0[2]), 0.0], ts, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sol.q[:, 2], ref[:, 0], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(sol.qd[:, 2], ref[:, 1], rtol=1e-7, atol=1e-7)
    # The piston stays on its axis without turning, to round-off.
    np.testing.assert_allclose(sol.q[:, 7:], 0.0, atol=1e-14)


def test_slider_crank_work_energy_with_a_constant_torque():
    # Without friction and with a constant torque tau0 (omega0 -> inf), the
    # energy grows by the motor's work tau0 (theta - theta0) exactly.
    model = lx.systems.slider_crank()
    params = {**model.params, "omega0": 1e30, "c": 0.0}
    model = lx.systems.Model(**{**vars(model), "params": params})
    q0, qd0 = model.initial_state()
    _, sol = simulate(model, q0, qd0, 1.0)
    work = params["tau0"] * (sol.q[:, 2] - sol.q[0, 2])
    np.testing.assert_allclose(sol.energy - sol.energy[0], work, atol=1e-9)


def test_cart_pole_against_its_two_coordinate_equations():
    model = lx.systems.cart_pole()
    p = model.params
    big, m, l, g = p["M"], p["m"], p["l"], p["g"]
    inertia = m * l**2 / 3  # rod of length 2 l about its centre

    def rhs(t, y):
        x, th, xd, thd = y
        force = p["F0"] * math.sin(p["omega"] * t)
        mass = np.array([[big + m, -m * l * math.cos(th)],
                         [-m * l * math.cos(th), m * l**2 + inertia]])  # fmt: skip
        bias = np.array(
            [force - m * l * math.sin(th) * thd**2, m * g * l * math.sin(th)]
        )
        return [xd, thd, *np.linalg.solve(mass, bias)]

    q0, qd0 = model.initial_state()
    ts, sol = simulate(model, q0, qd0, 2.0)
    ref = solve_reference(rhs, [float(q0[0]), float(q0[5]), 0.0, 0.0], ts)
    np.testing.assert_allclose(sol.q[:, 0], ref[:, 0], atol=1e-8)
    np.testing.assert_allclose(sol.q[:, 5], ref[:, 1], atol=1e-8)
    # The pole's mass centre where the minimal coordinates put it.
    np.testing.assert_allclose(
        sol.q[:, 3], ref[:, 0] - l * np.sin(ref[:, 1]), atol=1e-8
    )


def test_chain_against_the_closed_form_in_absolute_angles():
    n = 3
    model = lx.systems.chain(n)
    p = model.params
    m, l, g = p["m"], p["l"], p["g"]
    idx = np.arange(n)
    coeff = (n - 1 - np.maximum.outer(idx, idx)) + 0.5
    coeff[idx, idx] = n - 1 - idx + 1 / 3
    coeff *= m * l**2

    def rhs(t, y):
        th, thd = y[:n], y[n:]
        diff = th[:, None] - th[None, :]
        mass = coeff * np.cos(diff)
        bias = (coeff * np.sin(diff)) @ thd**2 + m * g * l * (n - idx - 0.5) * np.sin(
            th
        )
        return np.concatenate([thd, np.linalg.solve(mass, -bias)])

    q0, qd0 = model.initial_state()
    ts, sol = simulate(model, q0, qd0, 2.0)
    ref = solve_reference(rhs, np.concatenate([np.asarray(q0[2::3]), np.zeros(n)]), ts)
    np.testing.assert_allclose(sol.q[:, 2::3], ref[:, :n], atol=1e-8)


def test_top_against_euler_angles_and_its_integrals():
    model = lx.systems.top()
    p = model.params
    m, h, g, i3 = p["m"], p["h"], p["g"], p["I3"]
    i1 = p["I1"] + m * h**2  # transverse, about the pivot
    q0, qd0 = model.initial_state()
    spin = float(TOP.body_angular_velocity(q0, qd0)[2])
    theta0 = math.acos(float(symmetry_axis(q0)[2]))
    p_psi = i3 * spin
    p_phi = p_psi * math.cos(theta0)  # released without precession

    def rhs(t, y):
        th, thd, phi, psi = y
        phid = (p_phi - p_psi * math.cos(th)) / (i1 * math.sin(th) ** 2)
        thdd = (i1 * phid**2 * math.sin(th) * math.cos(th) - p_psi * phid * math.sin(th)
                + m * g * h * math.sin(th)) / i1  # fmt: skip
        return [thd, thdd, phid, spin - phid * math.cos(th)]

    ts, sol = simulate(model, q0, qd0, 1.0)
    ref = solve_reference(rhs, [theta0, 0.0, 0.0, 0.0], ts)
    th, phi = ref[:, 0], ref[:, 2]
    axis = np.stack(
        [np.sin(th) * np.sin(phi), -np.sin(th) * np.cos(phi), np.cos(th)], 1
    )
    got = np.asarray(jax.jit(jax.vmap(symmetry_axis))(sol.q))
    np.testing.assert_allclose(got, axis, atol=1e-8)
    # Conserved: energy, the spin p_psi and the vertical angular momentum p_phi
    # (to the integration error, which scales with rtol: 3e-9 at 1e-11 here,
    # the fast spin dominating the state).
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-8)
    body = TOP
    inertia = np.diag([p["I1"], p["I1"], i3])
    # At every saved time at once: one compiled program, not one per operation.
    omegas = jax.jit(jax.vmap(body.body_angular_velocity))(sol.q, sol.qd)
    rotations = jax.jit(jax.vmap(body.rotation))(sol.q)
    for q, qd, w, rot in zip(
        np.asarray(sol.q), np.asarray(sol.qd), np.asarray(omegas),
        np.asarray(rotations), strict=True,
    ):  # fmt: skip
        r, v = q[:3], qd[:3]
        momentum = rot @ inertia @ w + m * np.cross(r, v)  # about the pivot
        assert momentum[2] == pytest.approx(p_phi, rel=1e-8)
        assert (inertia @ w)[2] == pytest.approx(p_psi, rel=1e-8)
