"""`from_mjcf`: a MuJoCo model (MJCF) as a lagrax Model of spatial bodies and joints.

The file is compiled by MuJoCo itself (`mujoco.MjModel`), so defaults, classes,
includes and inertias from geoms mean what they mean there; lagrax reads the
compiled tree. See docs/import.md for the mapping and its checks.
"""

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._assemble import assemble, constraint_labels
from ._body import GROUND_3D, SpatialBody, quaternion_rotation, resolve
from ._joints import (
    AbstractJoint,
    Hinge,
    SpatialPrismatic,
    Spherical,
    _rotation,
    turn_rows,
)
from ._loads import AbstractForce


_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_KINDS = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}
_QPOS = {_FREE: 7, _BALL: 4, _SLIDE: 1, _HINGE: 1}
_QVEL = {_FREE: 6, _BALL: 3, _SLIDE: 1, _HINGE: 1}


# Quaternions (w, x, y, z), MuJoCo's and lagrax's convention.


def _qmul(a, b):
    w1, v1 = a[0], a[1:]
    w2, v2 = b[0], b[1:]
    return jnp.concatenate(
        [
            jnp.atleast_1d(w1 * w2 - jnp.dot(v1, v2)),
            w1 * v2 + w2 * v1 + jnp.cross(v1, v2),
        ]
    )


def _qconj(a):
    return a * jnp.array([1.0, -1.0, -1.0, -1.0], a.dtype)


def _axis_angle(axis, angle):
    return jnp.concatenate(
        [jnp.atleast_1d(jnp.cos(angle / 2)), jnp.sin(angle / 2) * axis]
    )


def _rot(quat, v):
    return quaternion_rotation(quat) @ v


@dataclasses.dataclass(frozen=True)
class _Joint:
    kind: int
    body: int  # the MuJoCo body it moves
    name: str
    pos: tuple[float, ...]  # anchor in the body frame
    axis: tuple[float, ...]
    qpos0: tuple[float, ...]
    qposadr: int
    dofadr: int


class JointSpace(eqx.Module):
    """MuJoCo's joint space (qpos, qvel) and lagrax's q, qd of the same model:
    forward kinematics one way, the relative motion of the bodies the other.

    Built by [`lagrax.bodies.from_mjcf`][]; used through
    `Model.from_joint_space` and `Model.to_joint_space`.
    """

    nq: int = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    parent: tuple[int, ...] = eqx.field(static=True)  # per MuJoCo body
    body_pos: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    body_quat: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    joints: tuple[_Joint, ...] = eqx.field(static=True)
    # Per MuJoCo body: the lagrax body (group) it belongs to (-1: the ground),
    # and its frame in that group's principal frame (or the world).
    group: tuple[int, ...] = eqx.field(static=True)
    in_group_pos: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    in_group_quat: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    roots: tuple[int, ...] = eqx.field(static=True)  # the MuJoCo body of each group

    # -- qpos -> q ----------------------------------------------------------

    def _body_frames(self, qpos):
        """World pose (position, quaternion) of every MuJoCo body frame."""
        dtype = qpos.dtype
        pos = [jnp.zeros(3, dtype)]
        quat = [jnp.array([1.0, 0.0, 0.0, 0.0], dtype)]
        by_body = {j.body: j for j in self.joints}
        for b in range(1, len(self.parent)):
            p = self.parent[b]
            x = pos[p] + _rot(quat[p], jnp.asarray(self.body_pos[b], dtype))
            e = _qmul(quat[p], jnp.asarray(self.body_quat[b], dtype))
            joint = by_body.get(b)
            if joint is not None:
                x, e = _move(joint, qpos, x, e)
            pos.append(x)
            quat.append(e)
        return pos, quat

    def q_of(self, qpos) -> Array:
        """lagrax's q (every group's mass centre and principal-frame quaternion)
        at MuJoCo's qpos."""
        pos, quat = self._body_frames(qpos)
        out = []
        for b in self.roots:
            # The root body's frame is (x_in, e_in) in the group's principal
            # frame: the principal frame is the root's frame times its inverse.
            e_in = jnp.asarray(self.in_group_quat[b], qpos.dtype)
            x_in = jnp.asarray(self.in_group_pos[b], qpos.dtype)
            e = _qmul(quat[b], _qconj(e_in))
            out += [pos[b] - _rot(e, x_in), e]
        return jnp.concatenate(out)

    def qpos_rate(self, qpos, qvel) -> Array:
        """d qpos / dt for the joint velocities qvel (quaternion rates of ball
        and free joints from their angular velocities)."""
        rate = jnp.zeros(self.nq, qvel.dtype)
        for j in self.joints:
            a, d = j.qposadr, j.dofadr
            if j.kind in (_HINGE, _SLIDE):
                rate = rate.at[a].set(qvel[d])
            elif j.kind == _BALL:
                omega = jnp.concatenate([jnp.zeros(1, qvel.dtype), qvel[d : d + 3]])
                rate = rate.at[a : a + 4].set(0.5 * _qmul(qpos[a : a + 4], omega))
            else:
                omega = jnp.concatenate([jnp.zeros(1, qvel.dtype), qvel[d + 3 : d + 6]])
                rate = rate.at[a : a + 3].set(qvel[d : d + 3])
                rate = rate.at[a + 3 : a + 7].set(
                    0.5 * _qmul(qpos[a + 3 : a + 7], omega)
                )
        return rate

    def from_joint_space(self, qpos, qvel):
        qpos, qvel = jnp.asarray(qpos, float), jnp.asarray(qvel, float)
        _check_length("from_joint_space", "qpos", qpos, self.nq)
        _check_length("from_joint_space", "qvel", qvel, self.nv)
        return jax.jvp(self.q_of, (qpos,), (self.qpos_rate(qpos, qvel),))

    # -- q -> qpos ----------------------------------------------------------

    def _frames_of_q(self, q):
        """World pose of every MuJoCo body frame from lagrax's q."""
        dtype = q.dtype
        pos, quat = [], []
        for b in range(len(self.parent)):
            g = self.group[b]
            x_in = jnp.asarray(self.in_group_pos[b], dtype)
            e_in = jnp.asarray(self.in_group_quat[b], dtype)
            if g < 0:  # fixed in the world
                pos.append(x_in)
                quat.append(e_in)
                continue
            x_g, e_g = q[7 * g : 7 * g + 3], q[7 * g + 3 : 7 * g + 7]
            pos.append(x_g + _rot(e_g, x_in))
            quat.append(_qmul(e_g, e_in))
        return pos, quat

    def _joint_values(self, q):
        pos, quat = self._frames_of_q(q)
        values = []
        for j in self.joints:
            b, p = j.body, self.parent[j.body]
            x0 = pos[p] + _rot(quat[p], jnp.asarray(self.body_pos[b], q.dtype))
            e0 = _qmul(quat[p], jnp.asarray(self.body_quat[b], q.dtype))
            axis = jnp.asarray(j.axis, q.dtype)
            if j.kind == _HINGE:
                rel = _qmul(_qconj(e0), quat[b])
                sign = jnp.where(rel[0] < 0, -1.0, 1.0)
                angle = 2 * jnp.arctan2(sign * jnp.dot(rel[1:], axis), sign * rel[0])
                values.append(jnp.atleast_1d(angle + j.qpos0[0]))
            elif j.kind == _SLIDE:
                shift = jnp.dot(pos[b] - x0, _rot(e0, axis))
                values.append(jnp.atleast_1d(shift + j.qpos0[0]))
            elif j.kind == _BALL:
                values.append(_qmul(_qconj(e0), quat[b]))
            else:
                values.append(jnp.concatenate([pos[b], quat[b]]))
        return values

    def to_joint_space(self, q, qd):
        q, qd = jnp.asarray(q, float), jnp.asarray(qd, float)
        values, rates = jax.jvp(self._joint_values, (q,), (qd,))
        qpos = jnp.zeros(self.nq, q.dtype)
        qvel = jnp.zeros(self.nv, q.dtype)
        for j, value, rate in zip(self.joints, values, rates, strict=True):
            a, d = j.qposadr, j.dofadr
            qpos = qpos.at[a : a + _QPOS[j.kind]].set(value)
            if j.kind in (_HINGE, _SLIDE):
                qvel = qvel.at[d].set(rate[0])
            elif j.kind == _BALL:
                qvel = qvel.at[d : d + 3].set(2 * _qmul(_qconj(value), rate)[1:])
            else:
                qvel = qvel.at[d : d + 3].set(rate[:3])
                spin = 2 * _qmul(_qconj(value[3:]), rate[3:])[1:]
                qvel = qvel.at[d + 3 : d + 6].set(spin)
        return qpos, qvel


def _move(joint: _Joint, qpos, x, e):
    """MuJoCo's kinematics of one joint: the body frame (x, e) before it, after."""
    dtype = qpos.dtype
    a = joint.qposadr
    anchor_local = jnp.asarray(joint.pos, dtype)
    axis = jnp.asarray(joint.axis, dtype)
    if joint.kind == _FREE:
        e = qpos[a + 3 : a + 7]
        return qpos[a : a + 3], e / jnp.linalg.norm(e)
    anchor = x + _rot(e, anchor_local)
    if joint.kind == _SLIDE:
        return x + _rot(e, axis) * (qpos[a] - joint.qpos0[0]), e
    if joint.kind == _HINGE:
        e = _qmul(e, _axis_angle(axis, qpos[a] - joint.qpos0[0]))
    else:
        turn = qpos[a : a + 4]
        e = _qmul(e, turn / jnp.linalg.norm(turn))
    return anchor - _rot(e, anchor_local), e


def _floats(x) -> tuple[float, ...]:
    return tuple(float(v) for v in np.ravel(x))


def _check_length(caller, name, x, size):
    if x.shape != (size,):
        raise ValueError(
            f"{caller}: {name} must have shape ({size},) (the MuJoCo model's), got "
            f"{x.shape}."
        )


class _DofDamping(AbstractForce):
    """MuJoCo's joint damping: the generalized force -W^T (d * qvel), qvel the
    joint velocities (linear in qd, qvel = W qd)."""

    joint_space: JointSpace
    damping: tuple[Any, ...]  # per dof: a number or a key of params

    def force(self, t, q, qd, params):
        d = jnp.stack([resolve(c, params, q.dtype) for c in self.damping])

        def qvel(qd_):
            return self.joint_space.to_joint_space(q, qd_)[1]

        rate, pullback = jax.vjp(qvel, qd)
        return -pullback(d * rate)[0]


class _JointEnergies(eqx.Module):
    """The Lagrangian plus MuJoCo's joint-space energies: armature (rotor
    inertia), sum_k a_k qvel_k^2 / 2 with qvel = W(q) qd, exactly MuJoCo's a_k
    on the diagonal of its joint-space mass matrix; and joint springs, minus
    sum_j k_j (qpos_j - qpos_spring_j)^2 / 2 for hinges and slides."""

    lagrangian: Any
    joint_space: JointSpace
    armature: tuple[Any, ...]  # per dof: 0.0 or a key of params
    springs: tuple[tuple[int, Any, float], ...]  # (qpos index, k key, rest)

    def __call__(self, t, q, qd, params):
        qpos, qvel = self.joint_space.to_joint_space(q, qd)
        out = self.lagrangian(t, q, qd, params)
        if any(not isinstance(c, float) for c in self.armature):
            a = jnp.stack([resolve(c, params, q.dtype) for c in self.armature])
            out = out + 0.5 * jnp.sum(a * qvel**2)
        for index, key, rest in self.springs:
            k = resolve(key, params, q.dtype)
            out = out - 0.5 * k * (qpos[index] - rest) ** 2
        return out


def _per_dof(nv: int, pairs) -> tuple[Any, ...]:
    """Per dof: the params key of its (dof, key) pair, else 0.0."""
    keys: list[Any] = [0.0] * nv
    for d, key in pairs:
        keys[d] = key
    return tuple(keys)


def _with_joint_energies(system, joint_space, nv, armature, springs):
    lagrangian = _JointEnergies(
        system.lagrangian, joint_space, _per_dof(nv, armature), tuple(springs)
    )
    return eqx.tree_at(lambda s: s.lagrangian, system, lagrangian)


class _Weld(AbstractJoint):
    """MuJoCo's weld equality: a pin at the anchor and the relative orientation
    held (the antisymmetric part of R_ref^T R_a^T R_b)."""

    a: Any
    point_a: Any
    b: Any
    point_b: Any
    orientation: Any
    name: str = eqx.field(static=True, default="weld")

    def __call__(self, t, q, params):
        pin = self.a.position(q, params, self.point_a) - self.b.position(
            q, params, self.point_b
        )
        rel = jnp.asarray(self.orientation, q.dtype).T @ (
            _rotation(self.a, q).T @ _rotation(self.b, q)
        )
        return jnp.concatenate([pin, turn_rows(rel)])

    @property
    def labels(self):
        return (
            *(f"{self.name} {c}" for c in "xyz"),
            *(f"{self.name} turn {c}" for c in "xyz"),
        )


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


def from_mjcf(source, *, name: str | None = None):
    """A MuJoCo model as a [`lagrax.systems.Model`][] of spatial rigid bodies and
    joints, in lagrax's absolute coordinates.

    Every body that moves becomes a `SpatialBody` (its principal inertial frame;
    seven coordinates); bodies without joints are merged into their parent.
    Hinge, slide, ball and free joints become `Hinge`, `SpatialPrismatic`,
    `Spherical` and nothing; `equality connect` and `weld` close loops; joint
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

    **Returns:**

    A `Model` with `from_joint_space(qpos, qvel) -> (q, qd)` and
    `to_joint_space(q, qd) -> (qpos, qvel)` (MuJoCo's joint space).
    """
    from ..systems._drawing import cabinet
    from ..systems._model import Model

    mujoco, m, stem = _load(source)
    name = stem if name is None else name
    obj = mujoco.mjtObj
    body_names = [
        _name(mujoco, m, obj.mjOBJ_BODY, b, f"body{b}") for b in range(m.nbody)
    ]
    _refuse(mujoco, m, body_names)

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

    def to_group(b):
        """Body b's frame in its group's principal frame (or the world)."""
        rot_b = data.xmat[b].reshape(3, 3)
        g = group[b]
        if g < 0:
            return _floats(data.xpos[b]), _floats(world_quat(rot_b))
        rot_g = principal_rot[g]
        return (
            _floats(rot_g.T @ (data.xpos[b] - centre[g])),
            _floats(world_quat(rot_g.T @ rot_b)),
        )

    placed = [to_group(b) for b in range(m.nbody)]

    params: dict[str, Any] = {}
    bodies = []
    for g, b in enumerate(roots):
        key = body_names[b]
        params[f"{key}.mass"] = float(mass[g])
        params[f"{key}.inertia"] = np.asarray(principal[g], float)
        bodies.append(SpatialBody(7 * g, f"{key}.mass", f"{key}.inertia"))

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

    records, rows, damping, armature, springs, limits = [], [], [], [], [], {}
    for j in range(m.njnt):
        b = m.jnt_bodyid[j]
        kind = int(m.jnt_type[j])
        joint_name = _name(mujoco, m, obj.mjOBJ_JOINT, j, f"joint{j}")
        a0 = m.jnt_qposadr[j]
        records.append(
            _Joint(
                kind=kind,
                body=int(b),
                name=joint_name,
                pos=_floats(m.jnt_pos[j]),
                axis=_floats(m.jnt_axis[j]),
                qpos0=_floats(m.qpos0[a0 : a0 + _QPOS[kind]]),
                qposadr=int(a0),
                dofadr=int(m.jnt_dofadr[j]),
            )
        )
        if m.jnt_limited[j]:
            limits[joint_name] = _floats(m.jnt_range[j])
        parent = m.body_parentid[b]
        anchor = data.xanchor[j].copy()
        axis = data.xaxis[j].copy()
        if kind == _HINGE:
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
            springs.append((int(a0), key, float(m.qpos_spring[a0])))

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
                _Weld(
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
    coordinates = tuple(
        f"{body_names[b]}.{c}"
        for b in roots
        for c in ("x", "y", "z", "w", "e1", "e2", "e3")
    )
    units = ("m", "m", "m", "1", "1", "1", "1") * len(roots)

    tree = [(group[m.body_parentid[b]], group[b]) for b in roots]

    def points(t, q, p):
        centres = [q[7 * g : 7 * g + 3] for g in range(len(roots))]
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
        coordinates=coordinates,
        units=units,
        constraint_names=constraint_labels(bodies, rows),
        q_guess=_floats(q0),
        qd_guess=(0.0,) * len(q0),
        points=points,
        segments=segments,
        joint_space=joint_space,
        joint_limits=tuple(limits.items()),
    )


def from_urdf(path, *, name: str | None = None):
    """A URDF robot as a [`lagrax.systems.Model`][], read by MuJoCo's URDF
    compiler and then as [`lagrax.bodies.from_mjcf`][] reads MJCF.

    Links become spatial bodies with their `<inertial>` (mass, origin, inertia
    tensor); revolute, continuous and prismatic joints become hinges and
    sliders about their `axis` (limits kept as data); fixed joints weld a link
    to its parent (merged); `<dynamics damping>` is joint damping; gravity is
    -9.81 along z. Visual and collision geometry is dropped first (meshes need
    not be present): dynamics reads only the inertials, so a link that moves
    needs one.

    **Arguments:**

    - `path`: the `.urdf` file.
    - `name`: the model's name; default the robot's.
    """
    import xml.etree.ElementTree as ET

    text = os.fspath(path)
    if not os.path.exists(text):
        raise FileNotFoundError(f"from_urdf: no such file: {text!r}.")
    try:
        root = ET.parse(text).getroot()
    except ET.ParseError as e:
        raise ValueError(f"from_urdf: {text!r} is not valid XML: {e}") from e
    if root.tag != "robot":
        raise ValueError(
            f"from_urdf: {text!r} is not a URDF file (its root is <{root.tag}>, "
            "not <robot>)."
        )
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    mujoco = _mujoco("from_urdf")
    compiled = ET.SubElement(root, "mujoco")
    # Keep every link a body (lagrax merges welded ones itself) and the
    # inertias exactly as written.
    ET.SubElement(
        compiled, "compiler", fusestatic="false", discardvisual="true",
        balanceinertia="false", inertiafromgeom="false",
    )  # fmt: skip
    try:
        m = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    except ValueError as e:
        raise ValueError(f"from_urdf: MuJoCo could not read {text!r}: {e}") from e
    return from_mjcf(m, name=root.get("name") if name is None else name)


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


def _refuse(mujoco, m, body_names: Sequence[str]) -> None:
    """Clear errors for what lagrax does not read (yet)."""
    for b in range(1, m.nbody):
        count = int(np.sum(m.jnt_bodyid == b))
        if count > 1:
            raise ValueError(
                f"from_mjcf: body {body_names[b]!r} has {count} joints; lagrax reads "
                "one joint per body (several would need massless bodies between "
                "them). Split it into bodies of one joint each."
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


def joint_space_of(model) -> JointSpace:
    """The JointSpace of a model read from a file, or a clear error."""
    space = getattr(model, "joint_space", None)
    if space is None:
        raise ValueError(
            f"{model.name}: from_joint_space/to_joint_space need a model read by "
            "lagrax.bodies.from_mjcf; this one has no joint space."
        )
    return space
