"""Spatial hinge, prismatic and weld joints (`lagrax.bodies.Hinge`,
`SpatialPrismatic`, `Weld`) against the motions they allow, solved independently."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax import bodies as lb

from .helpers import solve_reference


def _quaternion(matrix):
    """(w, x, y, z) of a rotation matrix (Shepperd's method, w > 0 branch)."""
    w = 0.5 * math.sqrt(1.0 + matrix[0, 0] + matrix[1, 1] + matrix[2, 2])
    return np.array([w, (matrix[2, 1] - matrix[1, 2]) / (4 * w),
                     (matrix[0, 2] - matrix[2, 0]) / (4 * w),
                     (matrix[1, 0] - matrix[0, 1]) / (4 * w)])  # fmt: skip


def _rot_z(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rot_x(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


# A hinge axis tilted away from every coordinate axis.
TILT = _rot_z(0.4) @ _rot_x(0.7)


def test_hinged_rod_is_a_compound_pendulum():
    """A uniform rod (length L, mass m) hinged at one end to the ground about a
    tilted axis, gravity along -z: it turns about the axis only, by
    I th'' = -dV/dth with I = m L^2 / 3 and V = m g (L/2) [R(th) e_x]_z, solved by
    scipy; the pin and the axis hold to round-off."""
    length, mass, g = 1.2, 2.0, 9.81
    rod = lb.SpatialBody(0, mass, (1e-3, mass * length**2 / 12, mass * length**2 / 12))
    hinge = lb.Hinge(lb.GROUND_3D, None, rod, (-length / 2, 0.0, 0.0),
                     tuple(TILT[:, 2]), (0.0, 0.0, 1.0))  # fmt: skip
    system = lb.assemble([rod], [hinge], gravity=(0.0, 0.0, -g))

    def state(theta):
        frame = TILT @ _rot_z(theta)
        return np.concatenate([frame[:, 0] * length / 2, _quaternion(frame)])

    th0 = 0.3
    q0 = jnp.asarray(state(th0))
    np.testing.assert_allclose(system.constraints(0.0, q0, {}), 0.0, atol=1e-15)
    ts = jnp.linspace(0.0, 3.0, 31)
    sol = lx.simulate(system, q0, jnp.zeros(7), {}, t1=3.0, ts=ts, rtol=1e-11,
                      atol=1e-11)  # fmt: skip
    inertia, weight = mass * length**2 / 3, mass * g * length / 2
    r20, r21 = TILT[2, 0], TILT[2, 1]
    ref = solve_reference(
        lambda t, s: [s[1], -weight * (-math.sin(s[0]) * r20 + math.cos(s[0]) * r21)
                      / inertia],
        [th0, 0.0],
        np.asarray(ts),
    )  # fmt: skip
    # The rod's direction in the hinge frame gives its angle.
    direction = np.asarray(sol.q[:, :3]) @ TILT / (length / 2)
    theta = np.unwrap(np.arctan2(direction[:, 1], direction[:, 0]))
    np.testing.assert_allclose(theta, ref[:, 0], atol=1e-8)
    np.testing.assert_allclose(direction[:, 2], 0.0, atol=1e-10)
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-8)
    assert lb.multiplier_units([rod], [hinge]) == ("N",) * 3 + ("N m",) * 2 + ("J",)


def test_block_slides_down_a_tilted_axis_without_turning():
    """A block on a frictionless spatial slider along a, gravity along -z: it
    accelerates along a by -g a_z and keeps its orientation, exactly (a parabola
    in time along a straight line)."""
    g = 9.81
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    block = lb.SpatialBody(0, 1.5, (0.1, 0.2, 0.3))
    slider = lb.SpatialPrismatic(lb.GROUND_3D, block, tuple(axis))
    system = lb.assemble([block], [slider], gravity=(0.0, 0.0, -g))
    q0 = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.concatenate([jnp.asarray(0.4 * axis), jnp.zeros(4)])
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = lx.simulate(system, q0, qd0, {}, t1=1.0, ts=ts, rtol=1e-11, atol=1e-11)
    s = 0.4 * ts - 0.5 * g * axis[2] * ts**2
    np.testing.assert_allclose(sol.q[:, :3], np.outer(s, axis), atol=1e-10)
    np.testing.assert_allclose(sol.q[:, 3:], np.tile([1.0, 0, 0, 0], (11, 1)),
                               atol=1e-12)  # fmt: skip
    assert lb.multiplier_units([block], [slider]) == ("N",) * 2 + ("N m",) * 3 + ("J",)


def test_welded_bodies_move_as_one_rigid_body():
    """Two bodies welded at a relative rotation, the first hung from the ground
    by a ball joint, under gravity: at a random consistent state they accelerate
    as the one rigid body with their combined mass and inertia (parallel-axis
    theorem) on the same ball joint."""
    m1, m2, g = 1.3, 0.7, 9.81
    i1, i2 = np.array([0.02, 0.03, 0.04]), np.array([0.05, 0.01, 0.02])
    rot_a = _rot_z(0.3) @ _rot_x(-0.5)
    turn = _rot_x(0.8) @ _rot_z(-0.6)  # R_a^T R_b, held by the weld
    rot_b = rot_a @ turn
    x_a, x_b = np.array([0.2, -0.1, -0.5]), np.array([0.6, 0.3, -0.9])
    anchor, pivot = (x_a + x_b) / 2, np.zeros(3)
    a, b = lb.SpatialBody(0, m1, tuple(i1)), lb.SpatialBody(7, m2, tuple(i2))
    weld = lb.Weld(a, tuple(rot_a.T @ (anchor - x_a)), b,
                   tuple(rot_b.T @ (anchor - x_b)), turn)  # fmt: skip
    ball = lb.Spherical(lb.GROUND_3D, tuple(pivot), a, tuple(rot_a.T @ (pivot - x_a)))
    welded = lb.assemble([a, b], [ball, weld], gravity=(0.0, 0.0, -g))

    mass = m1 + m2
    centre = (m1 * x_a + m2 * x_b) / mass

    def about_centre(m, rot, moments, x):
        d = x - centre
        return rot @ np.diag(moments) @ rot.T + m * (d @ d * np.eye(3) - np.outer(d, d))

    inertia = about_centre(m1, rot_a, i1, x_a) + about_centre(m2, rot_b, i2, x_b)
    one = lb.SpatialBody(0, mass, rot_a.T @ inertia @ rot_a)  # in a's frame
    pin = lb.Spherical(lb.GROUND_3D, tuple(pivot), one,
                       tuple(rot_a.T @ (pivot - centre)))  # fmt: skip
    rigid = lb.assemble([one], [pin], gravity=(0.0, 0.0, -g))

    rng = np.random.default_rng(0)
    reference = np.concatenate([x_a, _quaternion(rot_a), x_b, _quaternion(rot_b)])
    np.testing.assert_allclose(welded.constraints(0.0, jnp.asarray(reference), {}),
                               0.0, atol=1e-15)  # fmt: skip
    q, qd = lx.consistent_state(
        welded,
        jnp.asarray(reference + 0.1 * rng.standard_normal(14)),
        jnp.asarray(rng.standard_normal(14)),
        {},
    )
    qdd, _ = lx.accelerations(welded, 0.0, q, qd, {})

    def as_one(x):  # the mass centre, and a's frame
        return jnp.concatenate([(m1 * x[:3] + m2 * x[7:10]) / mass, x[3:7]])

    qdd_one, _ = lx.accelerations(rigid, 0.0, as_one(q), as_one(qd), {})
    # Same e and e' in both: equal e'' is equal angular acceleration.
    np.testing.assert_allclose(qdd_one, as_one(qdd), rtol=0, atol=1e-9)
    assert np.abs(qdd[3:7]).max() > 1.0  # it does turn
    assert lb.multiplier_units([a, b], [ball, weld]) == (
        ("N",) * 6 + ("N m",) * 3 + ("J",) * 2
    )


def test_spatial_joints_refuse_planar_bodies():
    planar = lb.PlanarBody(0, 1.0, 1.0)
    hinge = lb.Hinge(lb.GROUND, None, planar, None, (0.0, 0.0, 1.0), (0.0, 0.0, 1.0))
    with pytest.raises(TypeError, match="spatial"):
        hinge(0.0, jnp.zeros(3), {})
