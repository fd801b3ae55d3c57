"""Models read from MJCF (`lb.from_mjcf`) against MuJoCo's own dynamics: its
accelerations (`mj_forward`'s qacc) at random states, the hard-constraint
solution built from its mass matrix, bias forces and constraint Jacobian for a
closed loop, and its trajectories."""

import importlib.resources
import pathlib

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import lagrax as lx
import lagrax.bodies as lb

from .helpers import mujoco_hard_loop_accelerations


MODELS = pathlib.Path(__file__).parent / "models"
GYM = importlib.resources.files("gymnasium") / "envs" / "mujoco" / "assets"
OFF = mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT


SOURCES = {
    # Two hinges, the lower one damped; capsules off the joint axes.
    "double_pendulum": lambda: str(MODELS / "double_pendulum.xml"),
    # A slide, a tilted hinge with a reference angle, a ball, a welded tool
    # (merged), a free body; full inertia tensors off the geoms.
    "arm": lambda: str(MODELS / "arm.xml"),
    # Robots shipped by a package: gymnasium's cart with two poles; its 7-joint
    # arm (armature and damping on every joint) with an object and a goal that
    # slide in the plane (two slides in one body); its hopper, whose torso moves
    # by two slides and a hinge (one body, three joints) and carries a leg of
    # hinges (armature and damping on every joint).
    "inverted_double_pendulum": lambda: str(GYM / "inverted_double_pendulum.xml"),
    "pusher": lambda: str(GYM / "pusher.xml"),
    "hopper": lambda: str(GYM / "hopper.xml"),
}
# Larger robots of the same package, run with -m slow: a humanoid (a free
# torso; waist, hips and shoulders of two or three hinges in one body; springs,
# armature and damping), a cheetah (springs on every joint), a walker, an ant and
# a swimmer (without its medium).
SLOW_SOURCES = {
    name: (lambda name=name: str(GYM / f"{name}.xml"))
    for name in ("humanoid", "half_cheetah", "walker2d", "ant", "swimmer")
}


def _mujoco(source):
    m = (
        source
        if isinstance(source, mujoco.MjModel)
        else mujoco.MjModel.from_xml_path(source)
    )
    m.opt.disableflags |= OFF  # contacts and limits off: the smooth dynamics
    m.opt.density = m.opt.viscosity = 0.0  # no medium (lagrax reads none)
    return m, mujoco.MjData(m)


def _random_joint_state(m, rng):
    qpos = m.qpos0.copy()
    for j in range(m.njnt):
        a, kind = m.jnt_qposadr[j], int(m.jnt_type[j])
        if kind in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            qpos[a] += rng.uniform(-1.0, 1.0)
        elif kind == int(mujoco.mjtJoint.mjJNT_BALL):
            e = rng.normal(size=4)
            qpos[a : a + 4] = e / np.linalg.norm(e)
        else:
            qpos[a : a + 3] += 0.3 * rng.normal(size=3)
            e = rng.normal(size=4)
            qpos[a + 3 : a + 7] = e / np.linalg.norm(e)
    return qpos, rng.normal(size=m.nv)


def _joint_accelerations(model, saddle_solver=None):
    """qacc of lagrax's motion at joint state (qpos, qvel), jitted once."""

    @jax.jit
    def qacc(qpos, qvel, params):
        q, qd = model.from_joint_space(qpos, qvel)
        qdd, _ = lx.accelerations(
            model.system, 0.0, q, qd, params, saddle_solver=saddle_solver
        )
        _, (_, out) = jax.jvp(model.to_joint_space, (q, qd), (qd, qdd))
        return out

    return qacc


def _check_accelerations(model, m, d, seed, count):
    """lagrax's accelerations at `count` random joint states equal MuJoCo's qacc
    to 1e-9 of its largest entry; returns the states, for further checks."""
    qacc = _joint_accelerations(model)
    rng = np.random.default_rng(seed)
    states = [_random_joint_state(m, rng) for _ in range(count)]
    for qpos, qvel in states:
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        ours = np.asarray(qacc(qpos, qvel, model.params))
        scale = np.max(np.abs(d.qacc))
        np.testing.assert_allclose(ours, d.qacc, rtol=0, atol=1e-9 * scale)
    return states


# Tree models (joint coordinates, the default) of every model; their absolute
# coordinates (seven per body, every joint as rows) with -m slow (each compiles
# for 10-25 s; tests/test_tree.py compares the absolute double pendulum with its
# tree model, and the tests below read absolute models too).
CASES = (
    [(name, "joint") for name in sorted(SOURCES)]
    + [pytest.param(n, "joint", marks=pytest.mark.slow) for n in SLOW_SOURCES]
    + [
        pytest.param(n, "absolute", marks=pytest.mark.slow)
        for n in sorted(SOURCES) + sorted(SLOW_SOURCES)
    ]
)


@pytest.mark.parametrize("name, coordinates", CASES)
@pytest.mark.filterwarnings("ignore:from_mjcf.*fluid forces")
def test_accelerations_equal_mujocos(name, coordinates):
    source = {**SOURCES, **SLOW_SOURCES}[name]()
    model = lb.from_mjcf(source, coordinates=coordinates)
    m, d = _mujoco(source)
    for qpos, qvel in _check_accelerations(model, m, d, seed=0, count=5):
        # And the joint space maps back and forth (hinges within (-pi, pi]).
        q, qd = model.from_joint_space(qpos, qvel)
        back_pos, back_vel = model.to_joint_space(q, qd)
        np.testing.assert_allclose(back_vel, qvel, atol=1e-12)
        # The joints of a body with several are lagrax's coordinates: exact.
        chained = [
            m.jnt_qposadr[j]
            for j in range(m.njnt)
            if np.sum(m.jnt_bodyid == m.jnt_bodyid[j]) > 1
        ]
        np.testing.assert_allclose(
            np.asarray(back_pos)[chained], qpos[chained], atol=1e-15
        )
        if model.system.constraints is not None:
            phi = model.system.constraints(0.0, q, model.params)
            assert np.max(np.abs(phi)) < 1e-12


def test_forward_kinematics_equals_mujocos():
    """Every moving body's mass centre from from_joint_space equals MuJoCo's
    xipos (the double pendulum's bodies have no welded parts), in absolute
    coordinates."""
    source = SOURCES["double_pendulum"]()
    model = lb.from_mjcf(source, coordinates="absolute")
    m, d = _mujoco(source)
    qpos, qvel = _random_joint_state(m, np.random.default_rng(1))
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    q, _ = model.from_joint_space(qpos, qvel)
    for g, body in enumerate(("upper", "lower")):
        np.testing.assert_allclose(q[7 * g : 7 * g + 3], d.body(body).xipos, atol=1e-14)
    qpos_back, _ = model.to_joint_space(q, jnp.zeros_like(q))
    np.testing.assert_allclose(qpos_back, qpos, atol=1e-12)


@pytest.mark.slow  # absolute coordinates; the tree models run in CI
def test_closed_loop_equals_the_hard_solution_from_mujocos_pieces():
    """A four-bar closed by `equality connect` (a planar loop of spatial hinges:
    one row is redundant, so the least-squares saddle solver). MuJoCo's own
    equality constraints are soft (regularised); the reference is the hard
    solution of its mass matrix, bias and passive forces, constraint Jacobian
    efc_J and that Jacobian's rate (mj_jacDot)."""
    source = str(MODELS / "four_bar.xml")
    model = lb.from_mjcf(source, coordinates="absolute")  # joint: tests/test_tree.py
    m, d = _mujoco(source)
    qacc = _joint_accelerations(model, lx.LeastSquares())
    rng = np.random.default_rng(2)
    for _ in range(3):
        guess = model.from_joint_space(
            m.qpos0 + np.array([rng.uniform(-0.5, 0.5), 0.0, 0.0]),
            np.array([rng.normal(), 0.0, 0.0]),
        )
        crank = list(range(7))  # keep the crank; the loop solves the rest
        q, qd = lx.consistent_state(
            model.system, *guess, model.params, fixed_q=crank, fixed_qd=crank
        )
        qpos, qvel = (np.asarray(x) for x in model.to_joint_space(q, qd))
        d.qpos[:], d.qvel[:] = qpos, qvel
        hard = mujoco_hard_loop_accelerations(mujoco, m, d)
        ours = np.asarray(qacc(qpos, qvel, model.params))
        np.testing.assert_allclose(ours, hard, rtol=0, atol=1e-9 * np.abs(hard).max())


def test_trajectory_equals_mujocos():
    """1 s of the damped double pendulum: MuJoCo's RK4 at dt = 1e-4 against
    lagrax at rtol 1e-10, joint angles and rates."""
    source = SOURCES["double_pendulum"]()
    model = lb.from_mjcf(source)
    m, d = _mujoco(source)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.timestep = 1e-4
    qpos0, qvel0 = np.array([0.9, -0.4]), np.array([0.5, 1.0])
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    for _ in range(10_000):
        mujoco.mj_step(m, d)
    q0, qd0 = model.from_joint_space(qpos0, qvel0)
    sol = lx.simulate(model.system, q0, qd0, model.params, t1=1.0, rtol=1e-10,
                      atol=1e-10)  # fmt: skip
    qpos, qvel = model.to_joint_space(sol.q[-1], sol.qd[-1])
    np.testing.assert_allclose(qpos, d.qpos, atol=1e-7)
    np.testing.assert_allclose(qvel, d.qvel, atol=1e-7)


CART_AND_POLE = """
<mujoco>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="table" pos="0 0 1">
      <joint name="spin" type="hinge" axis="0 0 1"/>
      <geom type="cylinder" size="0.5 0.02" mass="4"/>
      <body name="cart" pos="0.2 0 0.1">
        <joint name="x" type="slide" axis="1 0 0"/>
        <joint name="z" type="slide" axis="0 0 1" ref="0.2"/>
        <joint name="tilt" type="hinge" axis="0 1 0" pos="0.1 0 0"/>
        <geom type="box" size="0.2 0.1 0.05" pos="0.05 0.02 0" mass="2"/>
        <body name="pole" pos="0.1 0 0">
          <joint name="swing" type="ball"/>
          <geom type="capsule" fromto="0 0 0 0 0.1 -0.6" size="0.03" mass="0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow  # absolute coordinates; the tree models run in CI
def test_body_with_several_joints_moves_as_mujocos():
    """A body moved by two slides and a hinge (a planar base, off-centre mass) on
    a turntable, carrying a pendulum on a ball joint: the base's coordinates are
    its joints, named after them, and the accelerations at random states equal
    MuJoCo's (absolute coordinates; in joint coordinates the ball may share the
    body with hinges: below)."""
    model = lb.from_mjcf(CART_AND_POLE, coordinates="absolute")
    assert model.coordinates[7:10] == ("cart.x", "cart.z", "cart.tilt")
    assert model.units[7:10] == ("m", "m", "rad")
    m, d = _mujoco(mujoco.MjModel.from_xml_string(CART_AND_POLE))
    for qpos, qvel in _check_accelerations(model, m, d, seed=4, count=5):
        q, _ = model.from_joint_space(qpos, qvel)
        np.testing.assert_allclose(q[7:10], qpos[1:4], atol=1e-15)
        assert np.max(np.abs(model.system.constraints(0.0, q, model.params))) < 1e-12


def test_tree_model_reads_several_joints_and_a_ball_in_one_body():
    """Joint coordinates: q is qpos, named by the joints; a ball joint may share
    its body with a slide before it (MuJoCo allows no rotation after a ball); the
    accelerations equal MuJoCo's."""
    xml = CART_AND_POLE.replace(
        '<joint name="swing" type="ball"/>',
        '<joint name="lift" type="slide" axis="0 0 1"/>'
        '<joint name="swing" type="ball"/>',
    )
    model = lb.from_mjcf(xml)
    assert model.coordinates == (
        "spin", "x", "z", "tilt", "lift", "swing.w", "swing.e1", "swing.e2",
        "swing.e3",
    )  # fmt: skip
    assert model.constraint_names == ("|e|=1 swing",)
    m, d = _mujoco(mujoco.MjModel.from_xml_string(xml))
    _check_accelerations(model, m, d, seed=6, count=3)


def test_masses_inertias_and_dampings_are_named_parameters():
    model = lb.from_mjcf(SOURCES["double_pendulum"]())
    m = mujoco.MjModel.from_xml_path(SOURCES["double_pendulum"]())
    assert model.params["upper.mass"] == pytest.approx(m.body("upper").mass[0])
    assert model.params["elbow.damping"] == 0.3
    np.testing.assert_allclose(
        np.sort(model.params["lower.inertia"]), np.sort(m.body("lower").inertia)
    )
    # A heavier lower link changes the accelerations as MuJoCo's does.
    heavier = {**model.params, "lower.mass": 2 * model.params["lower.mass"]}
    m.body("lower").mass[0] *= 2
    m.opt.disableflags |= OFF
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = [0.3, 0.2], [0.0, 0.0]
    mujoco.mj_forward(m, d)
    ours = _joint_accelerations(model)(d.qpos.copy(), d.qvel.copy(), heavier)
    np.testing.assert_allclose(ours, d.qacc, rtol=1e-9)


@pytest.mark.parametrize(
    "xml, message",
    [
        (
            '<body name="b"><joint type="hinge"/><joint type="ball"/>'
            '<geom size="0.1"/></body>',
            "body 'b' has 2 joints, one of them a ball or free joint",
        ),
        (
            '<body name="b"><joint type="hinge" frictionloss="1"/>'
            '<geom size="0.1"/></body>',
            "frictionloss",
        ),
        (
            '<body name="b"><joint type="hinge"/><inertial pos="0 0 0" mass="0" '
            'diaginertia="0 0 0"/></body>',
            "MuJoCo could not compile",  # its own check: a moving body needs mass
        ),
    ],
)
def test_what_is_not_read_is_refused_by_name(xml, message):
    with pytest.raises(ValueError, match=message):
        lb.from_mjcf(
            f"<mujoco><worldbody>{xml}</worldbody></mujoco>", coordinates="absolute"
        )
    with pytest.raises(FileNotFoundError, match="from_mjcf: no such file"):
        lb.from_mjcf("no/such/model.xml")


def test_urdf_arm_equals_mujocos_reading_of_it():
    """A URDF arm (revolute, continuous about a tilted axis, prismatic, fixed
    tool, damping, inertials off the axes, meshes that are not shipped): lagrax's
    accelerations equal MuJoCo's for the same robot at random states."""
    model = lb.from_urdf(MODELS / "arm.urdf")
    assert model.name == "arm3"
    assert dict(model.joint_limits)["shoulder"] == (-2.0, 2.0)
    assert "elbow" not in dict(model.joint_limits)  # continuous
    assert model.params["wrist.damping"] == 1.5
    # MuJoCo's own reading of the file, geometry stripped as from_urdf does.
    spec = mujoco.MjSpec.from_string(_without_geometry(MODELS / "arm.urdf"))
    m, d = _mujoco(spec.compile())
    _check_accelerations(model, m, d, seed=5, count=3)


def _without_geometry(path):
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    return ET.tostring(root, encoding="unicode")


def test_urdf_pendulum_against_its_equation():
    """One link on a revolute joint about y, its mass centre d along x of the
    joint: (I_yy + m d^2) theta'' = m g d cos(theta), from the URDF as written."""
    m_, d_, iyy = 1.7, 0.35, 0.02
    urdf = f"""<robot name="pendulum">
      <link name="world_link"/>
      <link name="bob"><inertial><origin xyz="{d_} 0 0"/><mass value="{m_}"/>
        <inertia ixx="0.01" iyy="{iyy}" izz="0.015" ixy="0" ixz="0" iyz="0"/>
      </inertial></link>
      <joint name="pivot" type="revolute"><parent link="world_link"/>
        <child link="bob"/><axis xyz="0 1 0"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
    </robot>"""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "pendulum.urdf"
        path.write_text(urdf)
        model = lb.from_urdf(path)
    qacc = _joint_accelerations(model)
    for theta in (-1.0, 0.2, 1.3):
        expected = m_ * 9.81 * d_ * np.cos(theta) / (iyy + m_ * d_**2)
        got = qacc(jnp.array([theta]), jnp.array([0.7]), model.params)
        np.testing.assert_allclose(got, [expected], rtol=1e-12)


@pytest.mark.parametrize(
    "coordinates", ["joint", pytest.param("absolute", marks=pytest.mark.slow)]
)
def test_weld_equality_equals_the_welded_tree(coordinates):
    """A tip welded to a hinged arm by `equality weld` (a free body held by six
    rows) moves as the same tip nested in the arm's body (merged into it), whose
    accelerations equal MuJoCo's."""
    arm = '<body name="arm" pos="0 0 1"><joint name="h" type="hinge" axis="0 1 0"/>'
    bar = '<geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" mass="1"/>'
    tip = '<geom type="box" size="0.1 0.05 0.02" mass="0.5"/>'
    nested = (f'<mujoco><worldbody>{arm}{bar}<body name="tip" pos="0.5 0.1 0.2" '
              f'euler="10 20 30">{tip}</body></body></worldbody></mujoco>')  # fmt: skip
    welded = (f'<mujoco><worldbody>{arm}{bar}</body><body name="tip" '
              f'pos="0.5 0.1 1.2" euler="10 20 30"><freejoint/>{tip}</body>'
              '</worldbody><equality><weld body1="arm" body2="tip"/></equality>'
              "</mujoco>")  # fmt: skip
    tree = lb.from_mjcf(nested, coordinates=coordinates)
    loop = lb.from_mjcf(welded, coordinates=coordinates)
    m, d = _mujoco(mujoco.MjModel.from_xml_string(nested))
    q_tree = _joint_accelerations(tree)
    rng = np.random.default_rng(6)
    for _ in range(3):
        angle, rate = rng.uniform(-2, 2), rng.normal()
        d.qpos[:], d.qvel[:] = [angle], [rate]
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(
            q_tree(jnp.array([angle]), jnp.array([rate]), tree.params), d.qacc,
            rtol=1e-10,
        )  # fmt: skip
        # The welded model at the same motion: the arm placed, the tip solved
        # for by the weld (consistent_state keeps the arm's coordinates).
        m_loop = mujoco.MjModel.from_xml_string(welded)
        qpos = m_loop.qpos0.copy()
        qpos[0] = angle
        qvel = np.zeros(m_loop.nv)
        qvel[0] = rate
        arm_only = [0] if coordinates == "joint" else list(range(7))
        q, qd = lx.consistent_state(
            loop.system, *loop.from_joint_space(qpos, qvel), loop.params,
            fixed_q=arm_only, fixed_qd=arm_only,
        )  # fmt: skip
        qdd, _ = lx.accelerations(loop.system, 0.0, q, qd, loop.params)
        _, (_, qacc) = jax.jvp(loop.to_joint_space, (q, qd), (qd, qdd))
        np.testing.assert_allclose(qacc[0], d.qacc[0], rtol=1e-9)


def test_fluid_forces_are_not_read_and_say_so():
    """Gymnasium's swimmer swims in a viscous medium, which lagrax does not model:
    reading it warns (its motion without the medium is checked with -m slow)."""
    with pytest.warns(UserWarning, match="does not read fluid forces"):
        lb.from_mjcf(str(GYM / "swimmer.xml"))
