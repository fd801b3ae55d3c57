"""Tree models (`lb.from_mjcf`'s default, joint coordinates): the mass matrix and
forces from the bodies' Jacobians against autodiff of the same Lagrangian,
trajectories against MuJoCo's RK4, energy, loops closed by equalities, and
jit / vmap / grad through them (gradients against finite differences).
Accelerations against MuJoCo's qacc on every model: tests/test_import.py."""

import importlib.resources
import pathlib

import diffrax as dfx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import lagrax as lx
import lagrax.bodies as lb
from lagrax._mechanics import lagrangian_terms

from .helpers import mujoco_hard_loop_accelerations


MODELS = pathlib.Path(__file__).parent / "models"
GYM = importlib.resources.files("gymnasium") / "envs" / "mujoco" / "assets"
OFF = mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT


def _mujoco(path):
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.disableflags |= OFF
    m.opt.density = m.opt.viscosity = 0.0
    return m, mujoco.MjData(m)


def _random_state(m, rng):
    qpos = m.qpos0 + 0.4 * rng.normal(size=m.nq)
    for j in range(m.njnt):
        a = m.jnt_qposadr[j] + (3 if m.jnt_type[j] == 0 else 0)
        if m.jnt_type[j] in (0, 1):
            qpos[a : a + 4] /= np.linalg.norm(qpos[a : a + 4])
    return qpos, rng.normal(size=m.nv)


class _Plain:
    """A Lagrangian as a plain function: lagrax differentiates it itself."""

    def __init__(self, lagrangian):
        self.lagrangian = lagrangian

    def __call__(self, t, q, qd, params):
        return self.lagrangian(t, q, qd, params)


@pytest.mark.parametrize(
    "path",
    [GYM / "ant.xml", MODELS / "arm.xml"],
    ids=["ant", "arm"],
)
def test_mass_matrix_and_forces_equal_autodiff_of_the_lagrangian(path):
    """M and f from one pass over the tree (Jacobians, Newton-Euler) equal
    d2L/dqd2 and dL/dq - (dp/dq) qd of the same L by autodiff: hinges (one
    with a reference angle, about a tilted axis), slides, ball and free joints
    (quaternion rates), a welded tool, armature. (Several joints in one body:
    tests/test_import.py against MuJoCo.)"""
    model = lb.from_mjcf(str(path))
    m, _ = _mujoco(path)
    lagrangian = model.system.lagrangian
    assert isinstance(lagrangian, lb.TreeLagrangian)

    @jax.jit
    def both(q, qd, params):
        return lagrangian.terms(0.0, q, qd, params), lagrangian_terms(
            _Plain(lagrangian), 0.0, q, qd, params
        )

    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd = model.from_joint_space(*_random_state(m, rng))
        (mass, force), (mass_ad, force_ad) = both(q, qd, model.params)
        np.testing.assert_allclose(
            mass, mass_ad, rtol=0, atol=1e-12 * np.abs(mass_ad).max()
        )
        np.testing.assert_allclose(
            force, force_ad, rtol=0, atol=1e-12 * np.abs(force_ad).max()
        )
        np.testing.assert_allclose(mass, mass.T, atol=1e-14 * np.abs(mass).max())


def test_derivatives_of_the_kinematics_and_terms():
    """The kinematics' derivatives come from the joints' motions (a custom
    JVP: dS_k = (sum_j C_kj S_j dtheta_j) x S_k, dR_b = [w_b]x R_b, ...), not
    from autodiff of the forward kinematics. The motions' Jacobian in q (off
    the unit quaternions) against autodiff through the forward kinematics;
    M and f's derivatives in (q, qd, params) along a random direction against
    central differences, in forward mode and, by the dot-product test, in
    reverse mode: arm.xml's slides, tilted hinges, ball, free body and
    armature (and the motions on the hopper, whose torso carries two slides
    and a hinge)."""
    from lagrax.bodies._kinematic_tree import _motions

    path = MODELS / "arm.xml"
    model = lb.from_mjcf(str(path))
    m, _ = _mujoco(path)
    lagrangian = model.system.lagrangian
    tree = lagrangian.tree
    rng = np.random.default_rng(5)
    q = jnp.asarray(m.qpos0 + 0.3 * rng.normal(size=m.nq))  # |e| != 1
    hopper = lb.from_mjcf(str(GYM / "hopper.xml")).system.lagrangian.tree
    q_hopper = jnp.asarray(rng.normal(size=hopper.nq))  # slides and a hinge on one body
    for tree_, q_ in ((tree, q), (hopper, q_hopper)):
        reference = jax.jacfwd(lambda q_, t=tree_: _motions.fun(t, q_))(q_)
        for got, want in zip(jax.jacfwd(tree_.motions)(q_), reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)

    q, qd = model.from_joint_space(*_random_state(m, rng))
    x = (q, qd, model.params)
    v = jax.tree.map(lambda a: jnp.asarray(rng.normal(size=np.shape(a))), x)

    @jax.jit
    def terms(x):
        return lagrangian.terms(0.0, *x)

    @jax.jit
    def derivatives(x, v):
        value, tangent = jax.jvp(terms, (x,), (v,))
        _, pull = jax.vjp(terms, x)
        return tangent, pull(value)[0]  # the cotangent: the terms themselves

    h = 1e-5
    ahead = terms(jax.tree.map(lambda a, b: a + h * b, x, v))
    behind = terms(jax.tree.map(lambda a, b: a - h * b, x, v))
    central = [(a - b) / (2 * h) for a, b in zip(ahead, behind, strict=True)]
    tangent, pulled = derivatives(x, v)
    for got, want in zip(tangent, central, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * np.abs(want).max())
    # Reverse mode by the dot-product test: <terms, J v> = <J^T terms, v>.
    value = terms(x)
    lhs = sum(jnp.vdot(a, b) for a, b in zip(value, tangent, strict=True))
    leaves = zip(jax.tree.leaves(pulled), jax.tree.leaves(v), strict=True)
    np.testing.assert_allclose(sum(jnp.vdot(a, b) for a, b in leaves), lhs, rtol=1e-12)


@pytest.fixture(scope="module")
def ant():
    path = GYM / "ant.xml"
    return lb.from_mjcf(str(path)), *_mujoco(path)


def test_ant_trajectory_equals_mujocos_rk4(ant):
    """1000 RK4 steps at the model's timestep from a spinning start: the joint
    positions and velocities equal MuJoCo's mj_step (RK4) to 1e-6; the unit
    quaternion stays a unit quaternion (projection)."""
    model, m, d = ant
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    rng = np.random.default_rng(1)
    qpos0, qvel0 = m.qpos0.copy(), 0.5 * rng.normal(size=m.nv)
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    steps, dt = 1000, m.opt.timestep
    for _ in range(steps):
        mujoco.mj_step(m, d)
    q0, qd0 = model.from_joint_space(qpos0, qvel0)
    sol = lx.simulate(
        model.system, q0, qd0, model.params, t1=steps * dt, solver=lx.RK4(),
        stepsize_controller=dfx.ConstantStepSize(), dt0=dt, max_steps=steps + 1,
    )  # fmt: skip
    qpos, qvel = model.to_joint_space(sol.q[-1], sol.qd[-1])
    np.testing.assert_allclose(qpos, d.qpos, rtol=0, atol=1e-6)
    np.testing.assert_allclose(qvel, d.qvel, rtol=0, atol=1e-6)
    assert np.max(np.abs(sol.phi)) < 1e-12


def test_energy_is_conserved_without_damping(ant):
    """Ant without joint damping, under gravity, tumbling: the energy (T + V,
    from the Lagrangian) is conserved by the adaptive solver to its tolerance."""
    model, m, _ = ant
    params = {
        k: (0.0 if k.endswith(".damping") else v) for k, v in model.params.items()
    }
    rng = np.random.default_rng(2)
    q0, qd0 = model.from_joint_space(m.qpos0, rng.normal(size=m.nv))
    sol = lx.simulate(model.system, q0, qd0, params, t1=1.0, rtol=1e-10, atol=1e-10,
                      ts=jnp.linspace(0.0, 1.0, 5))  # fmt: skip
    energy = np.asarray(sol.energy)
    assert np.ptp(energy) < 1e-7 * np.max(np.abs(energy))


def test_grad_through_a_robot(ant):
    """value_and_grad of a loss of the final joint positions with respect to a
    body's mass, through a jitted simulation (RK4 steps, each projected): the
    gradient equals central differences. (vmap over tree models:
    benchmarks/robots.py's batches, run small in tests/test_examples.py.)"""
    model, m, _ = ant
    rng = np.random.default_rng(3)
    q0, qd0 = model.from_joint_space(m.qpos0, rng.normal(size=m.nv))
    key = "torso.mass"
    steps, dt = 20, m.opt.timestep

    @jax.jit
    def loss(mass):
        params = {**model.params, key: mass}
        sol = lx.simulate(
            model.system, q0, qd0, params, t1=steps * dt, solver=lx.RK4(),
            stepsize_controller=dfx.ConstantStepSize(), dt0=dt, max_steps=steps,
        )  # fmt: skip
        return jnp.sum(sol.q[-1, 7:] ** 2)

    mass = jnp.asarray(model.params[key])
    value, grad = jax.jit(jax.value_and_grad(loss))(mass)
    h = 1e-4 * mass
    central = (loss(mass + h) - loss(mass - h)) / (2 * h)
    np.testing.assert_allclose(grad, central, rtol=1e-5)
    np.testing.assert_allclose(value, loss(mass), rtol=1e-12)


def test_loop_closed_by_connect_equals_the_hard_solution():
    """The four-bar of tests/models/four_bar.xml in joint coordinates: three
    hinge angles, the loop's three pin rows (one redundant in the plane:
    least squares). The crank's acceleration from MuJoCo's pieces (mass matrix,
    bias, efc_J and its rate) solved hard equals lagrax's."""
    path = MODELS / "four_bar.xml"
    model = lb.from_mjcf(str(path))
    assert model.coordinates == tuple(
        mujoco.mj_id2name(_mujoco(path)[0], mujoco.mjtObj.mjOBJ_JOINT, j)
        for j in range(3)
    )
    m, d = _mujoco(path)

    @jax.jit
    def qacc(q, qd, params):
        return lx.accelerations(
            model.system, 0.0, q, qd, params, saddle_solver=lx.LeastSquares()
        )[0]

    rng = np.random.default_rng(4)
    for _ in range(2):
        qpos = jnp.asarray(m.qpos0 + np.array([rng.uniform(-0.5, 0.5), 0, 0]))
        qvel = jnp.array([rng.normal(), 0.0, 0.0])
        q, qd = lx.consistent_state(
            model.system, qpos, qvel, model.params, fixed_q=[0], fixed_qd=[0]
        )
        d.qpos[:], d.qvel[:] = np.asarray(q), np.asarray(qd)
        hard = mujoco_hard_loop_accelerations(mujoco, m, d)
        ours = np.asarray(qacc(q, qd, model.params))
        np.testing.assert_allclose(ours, hard, rtol=0, atol=1e-9 * np.abs(hard).max())


def test_absolute_coordinates_stay_available():
    """coordinates="absolute" gives the former model (seven per body, every joint
    as rows) with the same parameters, and the same accelerations."""
    path = str(MODELS / "double_pendulum.xml")
    tree = lb.from_mjcf(path)
    absolute = lb.from_mjcf(path, coordinates="absolute")
    assert len(tree.coordinates) == 2 and len(absolute.coordinates) == 14
    assert tree.params.keys() == absolute.params.keys()
    for key in tree.params:
        np.testing.assert_allclose(tree.params[key], absolute.params[key], rtol=1e-12)
    qpos, qvel = np.array([0.4, -0.7]), np.array([1.0, -0.5])
    accel = []
    for model in (tree, absolute):
        q, qd = model.from_joint_space(qpos, qvel)
        qdd, _ = lx.accelerations(model.system, 0.0, q, qd, model.params)
        accel.append(jax.jvp(model.to_joint_space, (q, qd), (qd, qdd))[1][1])
    np.testing.assert_allclose(accel[0], accel[1], rtol=1e-10)
    with pytest.raises(ValueError, match="coordinates must be 'joint'"):
        lb.from_mjcf(path, coordinates="minimal")


def test_joint_reactions_equal_mujocos_interaction_forces(ant):
    """The force and torque each body's parent exerts through its joints (the
    Newton-Euler backward pass) equal MuJoCo's cfrc_int (after
    mj_rnePostConstraint), moved from the subtree's mass centre to the body's
    origin, at a random state and lagrax's own accelerations there."""
    model, m, d = ant
    qpos, qvel = _random_state(m, np.random.default_rng(5))
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    mujoco.mj_rnePostConstraint(m, d)
    q, qd = model.from_joint_space(qpos, qvel)
    qdd, _ = lx.accelerations(model.system, 0.0, q, qd, model.params)
    names, force, torque = lb.joint_reactions(model, 0.0, q, qd, qdd)
    ids = {m.body(b).name or f"body{b}": b for b in range(m.nbody)}  # as from_mjcf
    for name, f, n in zip(names, np.asarray(force), np.asarray(torque), strict=True):
        b = ids[name]
        f_mj = d.cfrc_int[b, 3:]
        n_mj = d.cfrc_int[b, :3] + np.cross(
            d.subtree_com[m.body_rootid[b]] - d.xpos[b], f_mj
        )
        np.testing.assert_allclose(f, f_mj, rtol=0, atol=1e-12)
        np.testing.assert_allclose(n, n_mj, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="closes loops"):
        lb.joint_reactions(lb.from_mjcf(str(MODELS / "four_bar.xml")), 0.0, q, qd, qdd)


def test_quaternion_projection_is_the_mass_weighted_projection(ant):
    """The closed-form projection of a tree model's unit quaternions (normalise,
    remove the rate's radial part) equals lagrax's general mass-weighted
    Newton projection from a drifted state."""
    from lagrax._projection import ManifoldProjector, _traced_once

    model, m, _ = ant
    rng = np.random.default_rng(6)
    q, qd = model.from_joint_space(*_random_state(m, rng))
    q = q.at[3:7].multiply(1.01)  # drifted off |e| = 1
    qd = qd.at[3:7].add(0.05 * q[3:7])  # and off e . e_dot = 0
    t = jnp.asarray(0.0)
    closed = ManifoldProjector(model.system, lx.SchurCholesky())(t, q, qd, model.params)
    newton = _traced_once(model.system, lx.SchurCholesky(), t, q, qd, model.params, 6)
    for ours, general in zip(closed, newton, strict=True):
        np.testing.assert_allclose(ours, general, rtol=0, atol=1e-12)


CHAIN_ON_A_FLOATING_BODY = """
<mujoco>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ball_a" type="ball"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <body name="b" pos="0.3 0 0">
        <joint name="ball_b" type="ball" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.03" mass="0.7"/>
      </body>
    </body>
    <body name="c" pos="0.6 0.1 1">
      <freejoint name="free_c"/>
      <geom type="box" size="0.1 0.05 0.02" mass="2"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="b" body2="c" anchor="0.3 0.1 0"/>
  </equality>
</mujoco>
"""


class _PlainRows:
    """Constraints as a plain function: one saddle solve of all the rows."""

    def __init__(self, constraints):
        self.constraints = constraints

    def __call__(self, t, q, params):
        return self.constraints(t, q, params)


def test_quaternion_rows_solved_apart_equal_the_whole_saddle_solve():
    """The unit quaternions' rows are left out of the saddle solve and added in
    closed form (`decoupled_rows`): the accelerations and every multiplier
    equal one saddle solve of all the rows, also off |e| = 1, with Baumgarte
    terms, and with a force that pushes along the quaternions (which their
    rows then carry). Two balls and a free body closed into a loop."""
    model = lb.from_mjcf(CHAIN_ON_A_FLOATING_BODY)
    system = model.system
    assert system.constraints.decoupled_rows()  # the three quaternions
    rng = np.random.default_rng(7)
    q0 = jnp.asarray(model.q_guess)
    q, qd = lx.consistent_state(
        system, q0, jnp.asarray(rng.normal(size=q0.shape)), model.params
    )
    q = q * (1 + 1e-3 * rng.normal(size=q.shape))  # off the constraints
    push = jnp.asarray(rng.normal(size=q.shape))

    def forces(t, q, qd, params):
        return push

    ours = lx.System(system.lagrangian, system.constraints, forces)
    whole = lx.System(system.lagrangian, _PlainRows(system.constraints), forces)
    stabilization = lx.Baumgarte(5.0, 5.0)  # its terms join the right-hand side
    qdd, lam = lx.accelerations(ours, 0.0, q, qd, model.params, stabilization)
    qdd_all, lam_all = lx.accelerations(whole, 0.0, q, qd, model.params, stabilization)
    np.testing.assert_allclose(qdd, qdd_all, rtol=0, atol=1e-10 * np.abs(qdd_all).max())
    np.testing.assert_allclose(lam, lam_all, rtol=0, atol=1e-10 * np.abs(lam_all).max())
    assert np.abs(lam_all[-3:]).min() > 1e-3  # the push loads them
    # A saddle solver that reads the rows from the system itself solves them all.
    qdd_limit, lam_limit = lx.accelerations(
        ours, 0.0, q, qd, model.params, stabilization, saddle_solver=lx.SingularLimit()
    )
    np.testing.assert_allclose(
        qdd_limit, qdd_all, rtol=0, atol=1e-9 * np.abs(qdd_all).max()
    )
    np.testing.assert_allclose(
        lam_limit, lam_all, rtol=0, atol=1e-9 * np.abs(lam_all).max()
    )
