"""`from_mjcf`: a MuJoCo model (MJCF) as a lagrax Model of spatial bodies and joints.

The file is compiled by MuJoCo itself (`mujoco.MjModel`), so defaults, classes,
includes and inertias from geoms mean what they mean there; lagrax reads the
compiled tree. See docs/import.md for the mapping and its checks.
"""

import os
import warnings
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._model import Model
from ._assemble import assemble, constraint_labels
from ._body import GROUND_3D, SpatialBody
from ._chain import ChainBody
from ._joint_loads import _DofDamping, _per_dof, _with_joint_energies
from ._joint_space import (
    _BALL,
    _FREE,
    _HINGE,
    _KINDS,
    _QPOS,
    _QVEL,
    _SLIDE,
    JointSpace,
    _Joint,
)
from ._joints import Hinge, SpatialPrismatic, Spherical, Weld
from ._tree_mjcf import tree_model


_SPATIAL = ("x", "y", "z", "w", "e1", "e2", "e3")


def _mujoco(caller: str):
    try:
        import mujoco
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{caller}: reading models needs MuJoCo's compiler: pip install mujoco "
            "(or pip install 'lagrax[import]')."
        ) from e
    return mujoco


def _load(source):
    mujoco = _mujoco("from_mjcf")
    if isinstance(source, mujoco.MjModel):
        return mujoco, source, "mjcf"
    text = os.fspath(source)
    if text.lstrip().startswith("<"):
        compile_, what, stem = mujoco.MjModel.from_xml_string, "the XML", "mjcf"
    else:
        if not os.path.exists(text):
            raise FileNotFoundError(f"from_mjcf: no such file: {text!r}.")
        compile_, what = mujoco.MjModel.from_xml_path, repr(text)
        stem = os.path.splitext(os.path.basename(text))[0]
    try:
        return mujoco, compile_(text), stem
    except ValueError as e:
        raise ValueError(f"from_mjcf: MuJoCo could not compile {what}: {e}") from e


def _name(mujoco, m, kind, i, fallback):
    name = mujoco.mj_id2name(m, kind, i)
    return name if name else fallback


def from_mjcf(source, *, name: str | None = None, coordinates: str = "joint"):
    """A MuJoCo model as a [`lagrax.Model`][]: by default a tree model in joint
    coordinates, MuJoCo's own qpos (see docs/tree.md); with
    `coordinates="absolute"`, spatial rigid bodies and joints in lagrax's
    absolute coordinates.

    **Joint coordinates** (the default): q is MuJoCo's qpos (hinge angles,
    slide displacements, unit quaternions of ball joints, position and unit
    quaternion of free joints) and qd its rate (a quaternion's rate, not
    MuJoCo's angular velocity: `from_joint_space` and `to_joint_space`
    convert). The bodies' mass matrix and forces come from one pass of forward
    kinematics over the tree ([`lagrax.bodies.TreeLagrangian`][]); the only
    constraint rows are the unit quaternions' norms and the loops closed by
    `equality connect` and `weld` (their multipliers are the loop forces).
    Several joints of any kind but free may share a body.

    **Absolute coordinates**: every body that moves becomes a `SpatialBody`
    (its principal inertial frame; seven coordinates); bodies without joints
    are merged into their parent.
    Hinge, slide, ball and free joints become `Hinge`, `SpatialPrismatic`,
    `Spherical` and nothing; a body moved by several hinges and slides becomes
    a body whose coordinates are those joints' values (the joints share no
    bodies with inertia between them); `equality connect` and `weld` close loops; joint
    damping is a force, joint armature a kinetic energy and joint stiffness a
    potential in joint space; gravity is MuJoCo's. Masses, principal inertias,
    dampings, armatures and stiffnesses are **named parameters**
    (`"<body>.mass"`, `"<body>.inertia"`, `"<joint>.damping"`,
    `"<joint>.armature"`, `"<joint>.stiffness"`), so [`lagrax.fit`][] identifies
    them. Joint ranges are
    kept as data (`model.joint_limits`), not enforced; contacts, actuators and
    tendons are not read.

    **Arguments:**

    - `source`: a path to an MJCF file, the XML as a string, or a
        `mujoco.MjModel`.
    - `name`: the model's name; default the file's.
    - `coordinates`: `"joint"` (default) or `"absolute"`.

    **Returns:**

    A `Model` with `from_joint_space(qpos, qvel) -> (q, qd)` and
    `to_joint_space(q, qd) -> (qpos, qvel)` (MuJoCo's joint space).
    """
    from ..systems._drawing import cabinet

    if coordinates not in ("joint", "absolute"):
        raise ValueError(
            f"from_mjcf: coordinates must be 'joint' (MuJoCo's qpos, the default) "
            f"or 'absolute' (seven per body), got {coordinates!r}."
        )
    mujoco, m, stem = _load(source)
    name = stem if name is None else name
    obj = mujoco.mjtObj
    body_names = [
        _name(mujoco, m, obj.mjOBJ_BODY, b, f"body{b}") for b in range(m.nbody)
    ]
    _refuse(mujoco, m, body_names, tree=coordinates == "joint")
    if m.opt.density != 0 or m.opt.viscosity != 0:
        warnings.warn(
            f"from_mjcf: {name!r} sets a medium (density {m.opt.density:g}, "
            f"viscosity {m.opt.viscosity:g}); lagrax does not read fluid forces, "
            "so the model moves as in vacuum. Add them as forces if they matter.",
            stacklevel=2,
        )
    if coordinates == "joint":
        joint_names = [
            _name(mujoco, m, obj.mjOBJ_JOINT, j, f"joint{j}") for j in range(m.njnt)
        ]
        equality_names = [
            _name(mujoco, m, obj.mjOBJ_EQUALITY, e, f"equality{e}")
            for e in range(m.neq)
        ]
        return tree_model(mujoco, m, name, body_names, joint_names, equality_names)

    # The reference configuration (qpos0): every body's world frame and
    # principal inertial frame, from MuJoCo's own kinematics.
    data = mujoco.MjData(m)
    data.qpos[:] = m.qpos0
    mujoco.mj_kinematics(m, data)
    mujoco.mj_comPos(m, data)

    joints_of = [[] for _ in range(m.nbody)]
    for j in range(m.njnt):
        joints_of[m.jnt_bodyid[j]].append(j)
    # Groups: a body with a joint starts one; a body without joints belongs to
    # its parent's (the world's: fixed).
    group = [-1] * m.nbody
    roots: list[int] = []
    for b in range(1, m.nbody):
        if joints_of[b]:
            group[b] = len(roots)
            roots.append(b)
        else:
            group[b] = group[m.body_parentid[b]]

    # Each group's mass, mass centre and inertia (world frame at qpos0), then
    # its principal frame. (MuJoCo's compiler refuses a moving body without mass.)
    mass = np.zeros(len(roots))
    moment = np.zeros((len(roots), 3))
    for b in range(1, m.nbody):
        if group[b] >= 0:
            mass[group[b]] += m.body_mass[b]
            moment[group[b]] += m.body_mass[b] * data.xipos[b]
    centre = moment / mass[:, None]
    tensor = np.zeros((len(roots), 3, 3))
    for b in range(1, m.nbody):
        g = group[b]
        if g < 0:
            continue
        rot = data.ximat[b].reshape(3, 3)
        d = data.xipos[b] - centre[g]
        tensor[g] += rot @ np.diag(m.body_inertia[b]) @ rot.T
        tensor[g] += m.body_mass[b] * (d @ d * np.eye(3) - np.outer(d, d))
    principal_rot, principal = [], []
    for g in range(len(roots)):
        moments, axes = np.linalg.eigh(tensor[g])
        if np.linalg.det(axes) < 0:
            axes[:, 0] = -axes[:, 0]
        principal.append(moments)
        principal_rot.append(axes)  # principal frame -> world, at qpos0

    def world_quat(rot):
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rot).reshape(9))
        return quat

    def in_frame_of(g, pos, rot):
        """A world pose at qpos0 in group g's principal frame (or the world)."""
        if g < 0:
            return _floats(pos), _floats(world_quat(rot))
        rot_g = principal_rot[g]
        return _floats(rot_g.T @ (pos - centre[g])), _floats(world_quat(rot_g.T @ rot))

    # Every body's frame in its group's principal frame (or the world).
    placed = [
        in_frame_of(group[b], data.xpos[b], data.xmat[b].reshape(3, 3))
        for b in range(m.nbody)
    ]

    # Joint records, in MuJoCo's order. The joints of a body with several are
    # the coordinates of a ChainBody.
    in_joints = [len(joints_of[b]) > 1 for b in range(m.nbody)]
    records, offsets, start = [], [], 0
    for b in roots:
        offsets.append(start)
        chain = in_joints[b]
        for i, j in enumerate(joints_of[b]):
            kind = int(m.jnt_type[j])
            a0 = int(m.jnt_qposadr[j])
            records.append(
                _Joint(
                    kind=kind,
                    body=int(b),
                    name=_name(mujoco, m, obj.mjOBJ_JOINT, j, f"joint{j}"),
                    pos=_floats(m.jnt_pos[j]),
                    axis=_floats(m.jnt_axis[j]),
                    qpos0=_floats(m.qpos0[a0 : a0 + _QPOS[kind]]),
                    qposadr=a0,
                    dofadr=int(m.jnt_dofadr[j]),
                    coordinate=start + i if chain else -1,
                )
            )
        start += len(joints_of[b]) if chain else 7
    record_of = {(r.body, r.qposadr): r for r in records}
    record_index = {r.qposadr: i for i, r in enumerate(records)}

    params: dict[str, Any] = {}
    bodies = []
    for g, b in enumerate(roots):
        key = body_names[b]
        params[f"{key}.mass"] = float(mass[g])
        params[f"{key}.inertia"] = np.asarray(principal[g], float)
        if not in_joints[b]:
            bodies.append(SpatialBody(offsets[g], f"{key}.mass", f"{key}.inertia"))
            continue
        # Before its joints (identities at qpos0) the body stands where it
        # stands at qpos0; its principal frame is fixed in it after them.
        rot_b = data.xmat[b].reshape(3, 3)
        parent_group = group[m.body_parentid[b]]
        offset_pos, offset_quat = in_frame_of(parent_group, data.xpos[b], rot_b)
        principal_pos, principal_quat = in_frame_of(-1, *_relative(
            data.xpos[b], rot_b, centre[g], principal_rot[g]
        ))  # fmt: skip
        bodies.append(
            ChainBody(
                offsets[g],
                f"{key}.mass",
                f"{key}.inertia",
                GROUND_3D if parent_group < 0 else bodies[parent_group],
                offset_pos,
                offset_quat,
                tuple(record_of[(b, int(m.jnt_qposadr[j]))] for j in joints_of[b]),
                principal_pos,
                principal_quat,
            )
        )

    def frame(b):
        return GROUND_3D if group[b] < 0 else bodies[group[b]]

    def local_point(b, world):
        g = group[b]
        return _floats(world if g < 0 else principal_rot[g].T @ (world - centre[g]))

    def local_axis(b, world):
        g = group[b]
        return _floats(world if g < 0 else principal_rot[g].T @ world)

    def rotation_of(b):
        g = group[b]
        return np.eye(3) if g < 0 else principal_rot[g]

    rows, damping, armature, springs, limits = [], [], [], [], {}
    for j in range(m.njnt):
        b = m.jnt_bodyid[j]
        kind = int(m.jnt_type[j])
        joint_name = _name(mujoco, m, obj.mjOBJ_JOINT, j, f"joint{j}")
        a0 = m.jnt_qposadr[j]
        if m.jnt_limited[j]:
            limits[joint_name] = _floats(m.jnt_range[j])
        parent = m.body_parentid[b]
        anchor = data.xanchor[j].copy()
        axis = data.xaxis[j].copy()
        if isinstance(frame(b), ChainBody):
            pass  # the body's own coordinates: no rows
        elif kind == _HINGE:
            rows.append(
                Hinge(
                    frame(parent),
                    local_point(parent, anchor),
                    frame(b),
                    local_point(b, anchor),
                    local_axis(parent, axis),
                    local_axis(b, axis),
                    name=joint_name,
                )  # fmt: skip
            )
        elif kind == _SLIDE:
            rows.append(
                SpatialPrismatic(
                    frame(parent),
                    frame(b),
                    local_axis(parent, axis),
                    point_a=local_point(parent, anchor),
                    point_b=local_point(b, anchor),
                    orientation=rotation_of(parent).T @ rotation_of(b),
                    name=joint_name,
                )  # fmt: skip
            )
        elif kind == _BALL:
            rows.append(
                Spherical(
                    frame(parent),
                    local_point(parent, anchor),
                    frame(b),
                    local_point(b, anchor),
                    name=joint_name,
                )  # fmt: skip
            )
        for d in range(m.jnt_dofadr[j], m.jnt_dofadr[j] + _QVEL[kind]):
            if m.dof_damping[d] != 0:
                key = f"{joint_name}.damping"
                params[key] = float(m.dof_damping[d])
                damping.append((d, key))
            if m.dof_armature[d] != 0:
                key = f"{joint_name}.armature"
                params[key] = float(m.dof_armature[d])
                armature.append((d, key))
        if m.jnt_stiffness[j] != 0:  # hinges and slides (others refused)
            key = f"{joint_name}.stiffness"
            params[key] = float(m.jnt_stiffness[j])
            springs.append((record_index[int(a0)], key, float(m.qpos_spring[a0])))

    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        label = _name(mujoco, m, obj.mjOBJ_EQUALITY, e, f"equality{e}")
        if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_CONNECT):
            world = data.xpos[b1] + data.xmat[b1].reshape(3, 3) @ m.eq_data[e, :3]
            rows.append(
                Spherical(
                    frame(b1),
                    local_point(b1, world),
                    frame(b2),
                    local_point(b2, world),
                    name=label,
                )  # fmt: skip
            )
        else:  # weld (others are refused above)
            _check_weld_at_reference(mujoco, m, data, e, label)
            world = data.xpos[b2] + data.xmat[b2].reshape(3, 3) @ m.eq_data[e, :3]
            rows.append(
                Weld(
                    frame(b1),
                    local_point(b1, world),
                    frame(b2),
                    local_point(b2, world),
                    rotation_of(b1).T @ rotation_of(b2),
                    name=label,
                )  # fmt: skip
            )

    joint_space = JointSpace(
        nq=int(m.nq),
        nv=int(m.nv),
        parent=tuple(int(p) for p in m.body_parentid),
        body_pos=tuple(_floats(r) for r in m.body_pos),
        body_quat=tuple(_floats(r) for r in m.body_quat),
        joints=tuple(records),
        group=tuple(group),
        in_group_pos=tuple(p for p, _ in placed),
        in_group_quat=tuple(e for _, e in placed),
        roots=tuple(roots),
        frames=tuple(bodies),
        offsets=tuple(offsets),
    )
    loads = []
    if damping:
        loads.append(_DofDamping(joint_space, _per_dof(m.nv, damping)))
    gravity = None
    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = _floats(m.opt.gravity)
    system = assemble(bodies, rows, loads, gravity=gravity)
    if armature or springs:
        system = _with_joint_energies(system, joint_space, m.nv, armature, springs)

    q0, _ = joint_space.from_joint_space(
        np.asarray(m.qpos0), np.zeros(m.nv)
    )  # the reference configuration, as lagrax's q
    coordinates, units = [], []
    for b, body in zip(roots, bodies, strict=True):
        if isinstance(body, ChainBody):
            coordinates += [f"{body_names[b]}.{j.name}" for j in body.joints]
            units += ["rad" if j.kind == _HINGE else "m" for j in body.joints]
        else:
            coordinates += [f"{body_names[b]}.{c}" for c in _SPATIAL]
            units += ["m", "m", "m", "1", "1", "1", "1"]

    tree = [(group[m.body_parentid[b]], group[b]) for b in roots]

    def points(t, q, p):
        centres = [body.position(q, p) for body in bodies]
        return jnp.stack(
            [cabinet(jnp.zeros(3, q.dtype))] + [cabinet(c) for c in centres]
        )

    segments = tuple((a + 1, b + 1) for a, b in tree)
    return Model(
        name=name,
        description=f"{name}: read from MJCF ({len(roots)} bodies, {m.njnt} joints, "
        f"{m.neq} equality constraints)",
        system=system,
        params=params,
        coordinates=tuple(coordinates),
        units=tuple(units),
        constraint_names=constraint_labels(bodies, rows),
        q_guess=_floats(q0),
        qd_guess=(0.0,) * len(q0),
        points=points,
        segments=segments,
        joint_space=joint_space,
        joint_limits=tuple(limits.items()),
    )


def _relative(pos, rot, pos_b, rot_b):
    """Frame b's pose (position, rotation) in the frame (pos, rot)."""
    return rot.T @ (pos_b - pos), rot.T @ rot_b


def _floats(x) -> tuple[float, ...]:
    return tuple(float(v) for v in np.ravel(x))


def _check_weld_at_reference(mujoco, m, data, e, label) -> None:
    """lagrax welds two bodies as they stand at qpos0; MuJoCo's `relpose`, when
    given, may ask for another relative pose: refuse that one by name."""
    b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    rot1 = data.xmat[b1].reshape(3, 3)
    relpos = rot1.T @ (data.xpos[b2] - data.xpos[b1])
    relquat = np.zeros(4)
    mujoco.mju_mat2Quat(relquat, (rot1.T @ data.xmat[b2].reshape(3, 3)).reshape(9))
    want_pos, want_quat = m.eq_data[e, 3:6], m.eq_data[e, 6:10]
    want_quat = want_quat / np.linalg.norm(want_quat)
    same_turn = min(
        np.abs(relquat - want_quat).max(), np.abs(relquat + want_quat).max()
    )
    if np.abs(relpos - want_pos).max() > 1e-9 or same_turn > 1e-9:
        raise ValueError(
            f"from_mjcf: weld {label!r} asks for a relative pose (relpose) that the "
            "model's reference configuration does not have; lagrax welds the two "
            "bodies as they stand at qpos0. Remove relpose, or place the bodies so."
        )


def _refuse(mujoco, m, body_names: Sequence[str], tree: bool) -> None:
    """Clear errors for what lagrax does not read (yet)."""
    for b in range(1, m.nbody):
        kinds = [int(k) for k in m.jnt_type[m.jnt_bodyid == b]]
        shared = (_FREE,) if tree else (_FREE, _BALL)
        if len(kinds) > 1 and any(k in shared for k in kinds):
            raise ValueError(
                f"from_mjcf: body {body_names[b]!r} has {len(kinds)} joints, one "
                "of them a ball or free joint; lagrax reads several hinges and "
                "slides in one body, or one joint of any kind. Split the ball or "
                "free joint off into a body of its own."
            )
    for j in range(m.njnt):
        for d in range(m.jnt_dofadr[j], m.jnt_dofadr[j] + _QVEL[int(m.jnt_type[j])]):
            if m.dof_frictionloss[d] != 0:
                raise ValueError(
                    f"from_mjcf: joint {j} has a non-zero frictionloss (dry "
                    "friction), which lagrax does not model; set it to 0."
                )
        if m.jnt_stiffness[j] != 0 and int(m.jnt_type[j]) in (_FREE, _BALL):
            raise ValueError(
                f"from_mjcf: joint {j} is a {_KINDS[int(m.jnt_type[j])]} joint with "
                "a non-zero stiffness; lagrax reads springs on hinges and slides."
            )
    kinds = (int(mujoco.mjtEq.mjEQ_CONNECT), int(mujoco.mjtEq.mjEQ_WELD))
    for e in range(m.neq):
        if int(m.eq_type[e]) not in kinds:
            raise ValueError(
                f"from_mjcf: equality {e} is of a type lagrax does not read "
                f"({mujoco.mjtEq(int(m.eq_type[e])).name}); connect and weld are read."
            )
        if int(m.eq_objtype[e]) != int(mujoco.mjtObj.mjOBJ_BODY):
            raise ValueError(
                f"from_mjcf: equality {e} names sites; lagrax reads connect and weld "
                "between bodies (body1=, body2=, anchor=)."
            )
