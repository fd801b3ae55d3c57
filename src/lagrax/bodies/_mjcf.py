"""`from_mjcf`: a MuJoCo model (MJCF) as a lagrax Model of spatial bodies and joints.

The file is compiled by MuJoCo itself (`mujoco.MjModel`), so defaults, classes,
includes and inertias from geoms mean what they mean there; lagrax reads the
compiled tree. See docs/import.md for the mapping and its checks.
"""

import dataclasses
import os
import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._custom_types import Params
from ._assemble import assemble, constraint_labels
from ._body import (
    GROUND_3D,
    AbstractBody,
    Ground,
    SpatialBody,
    Value,
    _body_rate_matrix,
    _local,
    matvec,
    quaternion_rotation,
    resolve,
)
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
_SPATIAL = ("x", "y", "z", "w", "e1", "e2", "e3")


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
    coordinate: int = -1  # its index in lagrax's q (joints of a ChainBody), or -1


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
    # Per group: the lagrax body (SpatialBody or ChainBody) and its first index in q.
    frames: tuple[AbstractBody, ...]
    offsets: tuple[int, ...] = eqx.field(static=True)

    # -- qpos -> q ----------------------------------------------------------

    def _body_frames(self, qpos):
        """World pose (position, quaternion) of every MuJoCo body frame."""
        dtype = qpos.dtype
        pos = [jnp.zeros(3, dtype)]
        quat = [jnp.array([1.0, 0.0, 0.0, 0.0], dtype)]
        for b in range(1, len(self.parent)):
            p = self.parent[b]
            x = pos[p] + _rot(quat[p], jnp.asarray(self.body_pos[b], dtype))
            e = _qmul(quat[p], jnp.asarray(self.body_quat[b], dtype))
            for joint in self.joints:  # in MuJoCo's order
                if joint.body == b:
                    x, e = _move(joint, qpos, x, e)
            pos.append(x)
            quat.append(e)
        return pos, quat

    def q_of(self, qpos) -> Array:
        """lagrax's q (every group's mass centre and principal-frame quaternion)
        at MuJoCo's qpos."""
        pos, quat = self._body_frames(qpos)
        out = []
        for b, frame in zip(self.roots, self.frames, strict=True):
            if isinstance(frame, ChainBody):  # its coordinates are its joints'
                out += [qpos[j.qposadr : j.qposadr + 1] for j in frame.joints]
                continue
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
        poses = [_pose(frame, q) for frame in self.frames]
        pos, quat = [], []
        for b in range(len(self.parent)):
            g = self.group[b]
            x_in = jnp.asarray(self.in_group_pos[b], dtype)
            e_in = jnp.asarray(self.in_group_quat[b], dtype)
            if g < 0:  # fixed in the world
                pos.append(x_in)
                quat.append(e_in)
                continue
            x_g, e_g = poses[g]
            pos.append(x_g + _rot(e_g, x_in))
            quat.append(_qmul(e_g, e_in))
        return pos, quat

    def _joint_values(self, q, joints=None):
        pos, quat = self._frames_of_q(q)
        values = []
        for j in self.joints if joints is None else joints:
            if j.coordinate >= 0:  # a ChainBody's joint: a coordinate itself
                values.append(q[j.coordinate : j.coordinate + 1])
                continue
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

    def joint_velocities(self, q, qd) -> Array:
        """MuJoCo's qvel at (q, qd) from the bodies' velocities, without the
        joint angles: a hinge's rate is the relative angular velocity along its
        axis, a slide's the relative velocity along its axis, a ball's the
        relative angular velocity in the body's frame, a free joint's the
        velocity of the body's origin and its angular velocity in its frame.
        Equal to `to_joint_space`'s qvel where the joints hold, and a smaller
        computation to differentiate (damping, armature)."""
        dtype = q.dtype
        # Only the groups that a joint of a SpatialBody needs: a ChainBody's
        # joint rates are its coordinates' rates.
        needed = sorted(
            {
                g
                for j in self.joints
                if j.coordinate < 0
                for g in (self.group[j.body], self.group[self.parent[j.body]])
                if g >= 0
            }
        )
        moved, moving = jax.jvp(
            lambda q_: [_pose(self.frames[g], q_) for g in needed], (q,), (qd,)
        )
        poses = dict(zip(needed, moved, strict=True))
        rates = dict(zip(needed, moving, strict=True))
        zero = jnp.zeros(3, dtype)
        turns, spins = {}, {}
        for g in needed:
            e, ed = poses[g][1], rates[g][1]
            turns[g] = quaternion_rotation(e)
            spins[g] = turns[g] @ (2 * (_body_rate_matrix(e) @ ed))

        def motion(g):  # (origin, velocity, angular velocity) of group g
            if g < 0:
                return zero, zero, zero
            return poses[g][0], rates[g][0], spins[g]

        qvel = jnp.zeros(self.nv, dtype)
        for j in self.joints:
            d = j.dofadr
            if j.coordinate >= 0:
                qvel = qvel.at[d].set(qd[j.coordinate])
                continue
            g, parent = self.group[j.body], self.group[self.parent[j.body]]
            x, v, omega = motion(g)
            x_p, v_p, omega_p = motion(parent)
            turn = turns[g] @ quaternion_rotation(
                jnp.asarray(self.in_group_quat[j.body], dtype)
            )  # the body's frame -> world
            origin = x + turns[g] @ jnp.asarray(self.in_group_pos[j.body], dtype)
            axis = turn @ jnp.asarray(j.axis, dtype)
            if j.kind == _HINGE:
                qvel = qvel.at[d].set(jnp.dot(axis, omega - omega_p))
            elif j.kind == _SLIDE:
                relative = (
                    v + jnp.cross(omega, origin - x)
                    - v_p - jnp.cross(omega_p, origin - x_p)
                )  # fmt: skip
                qvel = qvel.at[d].set(jnp.dot(axis, relative))
            elif j.kind == _BALL:
                qvel = qvel.at[d : d + 3].set(turn.T @ (omega - omega_p))
            else:
                qvel = qvel.at[d : d + 3].set(v + jnp.cross(omega, origin - x))
                qvel = qvel.at[d + 3 : d + 6].set(turn.T @ omega)
        return qvel


def _move(joint: _Joint, qpos, x, e):
    """MuJoCo's kinematics of one joint: the body frame (x, e) before it, after."""
    value = qpos[joint.qposadr : joint.qposadr + _QPOS[joint.kind]]
    return _move_by(joint, value, x, e)


def _move_by(joint: _Joint, value, x, e):
    """The body frame (x, e) moved by one joint at its qpos `value` (a slice)."""
    dtype = value.dtype
    anchor_local = jnp.asarray(joint.pos, dtype)
    axis = jnp.asarray(joint.axis, dtype)
    if joint.kind == _FREE:
        e = value[3:7]
        return value[:3], e / jnp.linalg.norm(e)
    anchor = x + _rot(e, anchor_local)
    if joint.kind == _SLIDE:
        return x + _rot(e, axis) * (value[0] - joint.qpos0[0]), e
    if joint.kind == _HINGE:
        e = _qmul(e, _axis_angle(axis, value[0] - joint.qpos0[0]))
    else:
        e = _qmul(e, value / jnp.linalg.norm(value))
    return anchor - _rot(e, anchor_local), e


def _pose(frame, q):
    """World pose (position, quaternion) of a lagrax frame: the ground, a
    SpatialBody's principal frame or a ChainBody's."""
    if isinstance(frame, Ground):
        return jnp.zeros(3, q.dtype), jnp.array([1.0, 0.0, 0.0, 0.0], q.dtype)
    if isinstance(frame, SpatialBody):
        return q[frame.index : frame.index + 3], frame.quaternion(q)
    return frame.pose(q)


class ChainBody(AbstractBody):
    """A rigid body moved from its parent by a chain of hinges and slides (a
    MuJoCo body with several joints, e.g. the planar root of hopper or the hip
    of humanoid): its coordinates are the joint values themselves, and its pose
    is the parent's composed with the joints, as MuJoCo composes them.

    The joints of one body share no massless bodies between them, so absolute
    coordinates would need a body without inertia for each; in joint
    coordinates the body's kinetic energy, m |v|^2 / 2 + omega^T I omega / 2
    through the chain, keeps the mass matrix positive definite, and the joints
    need no constraint rows.
    """

    index: int = eqx.field(static=True)
    mass: Value
    inertia: Value
    parent: Any  # GROUND_3D, a SpatialBody or a ChainBody
    # The body's frame before its joints, in the parent's frame.
    offset_pos: tuple[float, ...] = eqx.field(static=True)
    offset_quat: tuple[float, ...] = eqx.field(static=True)
    joints: tuple[_Joint, ...] = eqx.field(static=True)
    # The principal inertial frame in the body's frame after its joints.
    principal_pos: tuple[float, ...] = eqx.field(static=True)
    principal_quat: tuple[float, ...] = eqx.field(static=True)

    @property
    def size(self) -> int:
        return len(self.joints)

    @property
    def dim(self) -> int:
        return 3

    def pose(self, q):
        """World position and quaternion of the principal frame."""
        dtype = q.dtype
        x, e = _pose(self.parent, q)
        x = x + _rot(e, jnp.asarray(self.offset_pos, dtype))
        e = _qmul(e, jnp.asarray(self.offset_quat, dtype))
        for i, joint in enumerate(self.joints):
            x, e = _move_by(joint, q[self.index + i : self.index + i + 1], x, e)
        x = x + _rot(e, jnp.asarray(self.principal_pos, dtype))
        return x, _qmul(e, jnp.asarray(self.principal_quat, dtype))

    def rotation(self, q) -> Array:
        """The rotation matrix principal frame -> world."""
        return quaternion_rotation(self.pose(q)[1])

    def position(self, q, params: Params, local: Value = None) -> Array:
        x, e = self.pose(q)
        return x + matvec(quaternion_rotation(e), _local(local, params, q.dtype, 3))

    def _rates(self, q, qd):
        (_, e), (xd, ed) = jax.jvp(self.pose, (q,), (qd,))
        return e, xd, 2 * matvec(_body_rate_matrix(e), ed)

    def angular_velocity(self, q, qd) -> Array:
        e, _, omega = self._rates(q, qd)
        return matvec(quaternion_rotation(e), omega)

    def kinetic_energy(self, q, qd, params: Params) -> Array:
        m = resolve(self.mass, params, q.dtype)
        inertia = resolve(self.inertia, params, q.dtype)
        inertia = jnp.diag(inertia) if inertia.shape == (3,) else inertia
        _, xd, omega = self._rates(q, qd)
        return 0.5 * (m * jnp.sum(xd**2) + jnp.sum(omega * matvec(inertia, omega)))

    def own_constraints(self, q) -> Array:
        return jnp.zeros((0,), q.dtype)


def _relative(pos, rot, pos_b, rot_b):
    """Frame b's pose (position, rotation) in the frame (pos, rot)."""
    return rot.T @ (pos_b - pos), rot.T @ rot_b


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
            return self.joint_space.joint_velocities(q, qd_)

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
    springs: tuple[tuple[int, Any, float], ...]  # (joint index, k key, rest)

    def __call__(self, t, q, qd, params):
        out = self.lagrangian(t, q, qd, params)
        if any(not isinstance(c, float) for c in self.armature):
            qvel = self.joint_space.joint_velocities(q, qd)
            a = jnp.stack([resolve(c, params, q.dtype) for c in self.armature])
            out = out + 0.5 * jnp.sum(a * qvel**2)
        if self.springs:
            sprung = [self.joint_space.joints[j] for j, _, _ in self.springs]
            values = self.joint_space._joint_values(q, sprung)
            for value, (_, key, rest) in zip(values, self.springs, strict=True):
                k = resolve(key, params, q.dtype)
                out = out - 0.5 * k * (value[0] - rest) ** 2
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
    if m.opt.density != 0 or m.opt.viscosity != 0:
        warnings.warn(
            f"from_mjcf: {name!r} sets a medium (density {m.opt.density:g}, "
            f"viscosity {m.opt.viscosity:g}); lagrax does not read fluid forces, "
            "so the model moves as in vacuum. Add them as forces if they matter.",
            stacklevel=2,
        )

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
        kinds = [int(k) for k in m.jnt_type[m.jnt_bodyid == b]]
        if len(kinds) > 1 and any(k in (_FREE, _BALL) for k in kinds):
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


def joint_space_of(model) -> JointSpace:
    """The JointSpace of a model read from a file, or a clear error."""
    space = getattr(model, "joint_space", None)
    if space is None:
        raise ValueError(
            f"{model.name}: from_joint_space/to_joint_space need a model read by "
            "lagrax.bodies.from_mjcf; this one has no joint space."
        )
    return space
