"""lagrax.bodies: kinematics, energies, joints and loads against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
from lagrax import bodies as lb


def test_planar_body_points_velocities_and_energy():
    body = lb.PlanarBody(3, "m", 0.4)
    q = jnp.array([9.0, 9.0, 9.0, 1.0, 2.0, 0.5])
    qd = jnp.array([0.0, 0.0, 0.0, 0.3, -0.2, 1.5])
    p = {"m": 2.0}
    c, s = np.cos(0.5), np.sin(0.5)
    np.testing.assert_allclose(
        body.position(q, p, (0.2, 0.1)), [1 + 0.2 * c - 0.1 * s, 2 + 0.2 * s + 0.1 * c]
    )
    # v_P = v_C + omega x r.
    np.testing.assert_allclose(
        body.velocity(q, qd, p, (0.2, 0.1)),
        [0.3 - 1.5 * (0.2 * s + 0.1 * c), -0.2 + 1.5 * (0.2 * c - 0.1 * s)],
    )
    expected = 0.5 * 2.0 * (0.3**2 + 0.2**2) + 0.5 * 0.4 * 1.5**2
    assert float(body.kinetic_energy(q, qd, p)) == pytest.approx(expected)
    assert float(body.potential_energy(q, p, (0.0, -9.81))) == pytest.approx(
        2.0 * 9.81 * 2.0
    )


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def test_spatial_body_rotation_and_angular_velocity():
    body = lb.SpatialBody(0, 1.5, (0.1, 0.2, 0.3))
    rng = np.random.default_rng(0)
    e = _unit(rng.normal(size=4))
    ed = rng.normal(size=4)
    ed -= (ed @ e) * e  # tangent to |e| = 1
    q = jnp.concatenate([jnp.array([0.1, 0.2, 0.3]), e])
    qd = jnp.concatenate([jnp.array([0.5, -0.1, 0.2]), ed])
    rot = np.asarray(body.rotation(q))
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-14)
    assert np.linalg.det(rot) == pytest.approx(1.0)
    # [omega_body]x = R^T Rdot, Rdot by central differences (independent of G).
    h = 1e-6
    rdot = (
        np.asarray(body.rotation(q + h * qd)) - np.asarray(body.rotation(q - h * qd))
    ) / (2 * h)
    skew = rot.T @ rdot
    omega = np.array([skew[2, 1], skew[0, 2], skew[1, 0]])
    np.testing.assert_allclose(body.body_angular_velocity(q, qd), omega, atol=1e-8)
    np.testing.assert_allclose(body.angular_velocity(q, qd), rot @ omega, atol=1e-8)
    inertia = np.diag([0.1, 0.2, 0.3])
    expected = 0.5 * 1.5 * np.asarray(qd[:3]) @ np.asarray(qd[:3])
    expected += 0.5 * omega @ inertia @ omega
    assert float(body.kinetic_energy(q, qd, {})) == pytest.approx(expected, rel=1e-7)
    # The regularized mass matrix is positive definite.
    system = lb.assemble([body])
    # Under jit: one program, rather than every autodiff operation compiled alone.
    mass = jax.jit(lambda q, qd: lx.mechanics(system, 0.0, q, qd, {}).mass)(q, qd)
    assert np.linalg.eigvalsh(np.asarray(mass)).min() > 0


def test_point_force_and_body_torque_are_the_virtual_work_of_the_load():
    body = lb.SpatialBody(0, 1.0, (0.1, 0.2, 0.3))
    rng = np.random.default_rng(1)
    q = jnp.concatenate(
        [jnp.asarray(rng.normal(size=3)), jnp.asarray(_unit(rng.normal(size=4)))]
    )
    qd = jnp.asarray(rng.normal(size=7))
    point = (0.3, -0.1, 0.2)
    force, torque = jnp.array([1.0, -2.0, 0.5]), jnp.array([0.2, 0.4, -0.3])
    generalized = lx.point_force(lambda q_: body.position(q_, {}, point), q, force)
    # Virtual power: Q . qd = f . v_P and W^T tau . qd = tau . omega.
    assert float(generalized @ qd) == pytest.approx(
        float(force @ body.velocity(q, qd, {}, point))
    )
    generalized = lx.body_torque(body.angular_velocity, q, torque)
    assert float(generalized @ qd) == pytest.approx(
        float(torque @ body.angular_velocity(q, qd))
    )
    planar = lb.PlanarBody(0, 1.0, 1.0)
    np.testing.assert_allclose(
        lx.body_torque(planar.angular_velocity, jnp.zeros(3), 2.5), [0.0, 0.0, 2.5]
    )
    with pytest.raises(ValueError, match="point_force: the force has shape"):
        lx.point_force(lambda q_: q_[:2], q, force)


# A block on a rail with a spring and a damper to the ground: the damped
# oscillator m x'' + c x' + k (x - l0) = u, solved in closed form.
BLOCK = lb.PlanarBody(0, "m", 0.01)
RAIL = lb.Prismatic(lb.GROUND, BLOCK, axis=(1.0, 0.0))
OSCILLATOR = lb.assemble(
    [BLOCK],
    [RAIL],
    [
        lb.Spring(lb.GROUND, (0.0, 0.0), BLOCK, (0.0, 0.0), "k", "l0"),
        lb.Damper(lb.GROUND, (0.0, 0.0), BLOCK, None, "c"),
        lb.Actuator(lb.GROUND, (0.0, 0.0), BLOCK, None, lambda t, q, qd, p: p["u"]),
    ],
)


@pytest.mark.parametrize("damping", [0.0, 0.4])
def test_spring_damper_actuator_oscillator(damping):
    p = {"m": 2.0, "k": 50.0, "l0": 1.0, "c": damping, "u": 5.0}
    x0 = 1.3
    ts = jnp.linspace(0.0, 2.0, 21)
    sol = lx.simulate(
        OSCILLATOR, jnp.array([x0, 0.0, 0.0]), jnp.zeros(3), p, t1=2.0, ts=ts,
        rtol=1e-11, atol=1e-11,
    )  # fmt: skip
    rest = p["l0"] + p["u"] / p["k"]
    zeta = damping / (2 * np.sqrt(p["k"] * p["m"]))
    wn = np.sqrt(p["k"] / p["m"])
    wd = wn * np.sqrt(1 - zeta**2)
    t = np.asarray(ts)
    a = x0 - rest
    x = rest + a * np.exp(-zeta * wn * t) * (
        np.cos(wd * t) + zeta * wn / wd * np.sin(wd * t)
    )
    np.testing.assert_allclose(sol.q[:, 0], x, atol=1e-9)
    # The spring is a potential: energy = T + k (x - l0)^2 / 2.
    spring = 0.5 * p["k"] * (np.asarray(sol.q[:, 0]) - p["l0"]) ** 2
    kinetic = 0.5 * p["m"] * np.asarray(sol.qd[:, 0]) ** 2
    np.testing.assert_allclose(sol.energy, kinetic + spring, atol=1e-12)


def test_driver_torque_and_inclined_slider():
    # A rod pinned at one end at the origin, its angle driven as
    # theta = w t + b t^2 / 2: the drive's multiplier is the torque it needs,
    # I_O theta'' + m g (l / 2) cos(theta).
    rod = lb.PlanarBody(0, 1.2, 1.2 * 0.5**2 / 12)
    drive = lb.Driver(rod, lambda t, p: 2.0 * t + 0.5 * 3.0 * t**2)
    system = lb.assemble(
        [rod],
        [lb.Revolute(lb.GROUND, (0.0, 0.0), rod, (-0.25, 0.0)), drive],
        gravity=(0.0, -9.81),
    )
    for t in (0.0, 0.7):
        theta, rate = 2.0 * t + 1.5 * t**2, 2.0 + 3.0 * t
        q = jnp.array([0.25 * np.cos(theta), 0.25 * np.sin(theta), theta])
        qd = rate * jnp.array([-0.25 * np.sin(theta), 0.25 * np.cos(theta), 1.0])
        qdd, lam = lx.accelerations(system, t, q, qd, {})
        assert float(qdd[2]) == pytest.approx(3.0)
        torque = 1.2 * 0.5**2 / 3 * 3.0 + 1.2 * 9.81 * 0.25 * np.cos(theta)
        assert float(lam[2]) == pytest.approx(torque)
    # A block on a rail inclined at beta slides down with g sin(beta).
    beta = 0.4
    block = lb.PlanarBody(0, 1.0, 0.1)
    slope = lb.assemble(
        [block],
        [lb.Prismatic(lb.GROUND, block, axis=(np.cos(beta), np.sin(beta)))],
        gravity=(0.0, -9.81),
    )
    qdd, _ = lx.accelerations(slope, 0.0, jnp.zeros(3), jnp.zeros(3), {})
    np.testing.assert_allclose(
        qdd, -9.81 * np.sin(beta) * np.array([np.cos(beta), np.sin(beta), 0.0]),
        atol=1e-12,
    )  # fmt: skip


def test_fixed_joint_makes_one_rigid_body():
    # Two welded halves fall freely together without turning; the weld carries
    # no force.
    a, b = lb.PlanarBody(0, 1.0, 0.1), lb.PlanarBody(3, 2.0, 0.3)
    weld = lb.Fixed(a, (0.5, 0.0), b, (-0.5, 0.0), angle=0.3)
    system = lb.assemble([a, b], [weld], gravity=(0.0, -9.81))
    q = jnp.array([0.0, 0.0, 0.2, 0.0, 0.0, 0.5])
    q, qd = lx.consistent_state(system, q, jnp.zeros(6), {}, fixed_q=[0, 1, 2])
    np.testing.assert_allclose(weld(0.0, q, {}), 0.0, atol=1e-14)
    qdd, lam = lx.accelerations(system, 0.0, q, qd, {})
    np.testing.assert_allclose(qdd, [0, -9.81, 0, 0, -9.81, 0], atol=1e-12)
    np.testing.assert_allclose(lam, 0.0, atol=1e-12)


def test_assemble_refuses_bad_input_with_names():
    with pytest.raises(ValueError, match="tile q without gaps"):
        lb.assemble([lb.PlanarBody(0, 1.0, 1.0), lb.PlanarBody(4, 1.0, 1.0)])
    with pytest.raises(ValueError, match="mix of planar and spatial"):
        lb.assemble([lb.PlanarBody(0, 1.0, 1.0), lb.SpatialBody(3, 1.0, (1, 1, 1))])
    with pytest.raises(TypeError, match="loads must be Spring"):
        lb.assemble([lb.PlanarBody(0, 1.0, 1.0)], loads=[lambda *a: 0.0])
    system = lb.assemble([lb.PlanarBody(0, "mass", 1.0)], gravity=(0.0, -9.81))
    with pytest.raises(KeyError, match="'mass' is not in params"):
        lx.accelerations(system, 0.0, jnp.zeros(3), jnp.zeros(3), {"m": 1.0})
    with pytest.raises(ValueError, match="bodies own 3 coordinates"):
        lx.accelerations(system, 0.0, jnp.zeros(4), jnp.zeros(4), {"mass": 1.0})


def test_parameters_of_bodies_are_differentiable():
    # d(qdd)/d(m) of the damped block on the rail: qdd = F / m, F = -k (x - l0).
    p = {"m": 2.0, "k": 50.0, "l0": 1.0, "c": 0.0, "u": 0.0}

    def accel(m):
        qdd, _ = lx.accelerations(
            OSCILLATOR, 0.0, jnp.array([1.2, 0.0, 0.0]), jnp.zeros(3), {**p, "m": m}
        )
        return qdd[0]

    force = -50.0 * 0.2
    assert float(jax.grad(accel)(2.0)) == pytest.approx(-force / 4.0)


def test_alike_parts_are_batched_without_changing_rows_or_order():
    # Joints of two kinds, interleaved, on five links: assemble groups alike
    # parts (one vmapped call per kind) and must return the rows in the given
    # order, equal to each joint evaluated on its own.
    links = [lb.PlanarBody(3 * k, "m", 0.01) for k in range(5)]
    pin = [lb.Revolute(links[k], (0.1, 0.0), links[k + 1], (-0.1, 0.0),
                       name=f"pin {k}") for k in range(0, 4, 2)]  # fmt: skip
    weld = [lb.Fixed(links[k], (0.1, 0.0), links[k + 1], (-0.1, 0.0), angle=0.2,
                     name=f"weld {k}") for k in range(1, 4, 2)]  # fmt: skip
    joints = [pin[0], weld[0], pin[1], weld[1]]
    blades = [lb.KnifeEdge(link, (0.05, 0.0)) for link in links]
    system = lb.assemble(links, joints, velocity_constraints=blades)
    q, qd = np.random.default_rng(2).normal(size=(2, 15))
    p = {"m": 1.0}
    np.testing.assert_allclose(
        system.constraints(0.0, jnp.asarray(q), p),
        jnp.concatenate([j(0.0, jnp.asarray(q), p) for j in joints]),
        rtol=1e-15,
    )
    np.testing.assert_allclose(
        system.velocity_constraints(0.0, jnp.asarray(q), jnp.asarray(qd), p),
        jnp.concatenate([b(0.0, jnp.asarray(q), jnp.asarray(qd), p) for b in blades]),
        rtol=1e-15,
    )
    kinetic = sum(link.kinetic_energy(q, qd, p) for link in links)
    assert float(system.lagrangian(0.0, q, qd, p)) == pytest.approx(float(kinetic))


def test_backsolve_adjoint_on_an_assembled_system_without_loads():
    """diffrax's BacksolveAdjoint strips gradients from the solver state (which
    holds the terms, so the assembled Lagrangian) with equinox's tree_at, which
    failed on an empty tuple of loads inside it. A free body thrown up: y(T) =
    y0 + v0 T - g T^2 / 2, so dy(T)/dv0 = T."""
    import diffrax as dfx

    system = lb.assemble([lb.PlanarBody(0, 1.0, 1.0)], gravity=(0.0, -9.81))

    def height(v0):
        sol = lx.simulate(
            system, jnp.zeros(3), jnp.array([0.0, v0, 0.0]), {}, t1=0.5,
            adjoint=dfx.BacksolveAdjoint(), rtol=1e-10, atol=1e-10,
        )  # fmt: skip
        return sol.q[-1, 1]

    value, slope = jax.value_and_grad(height)(2.0)
    assert float(value) == pytest.approx(2.0 * 0.5 - 9.81 * 0.5**2 / 2, rel=1e-9)
    assert float(slope) == pytest.approx(0.5, rel=1e-8)
