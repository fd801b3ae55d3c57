"""MuJoCo's joint space (qpos, qvel) and lagrax's (q, qd) of one model read from
a file: the joint records, forward kinematics and the joints' relative motion."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._body import (
    AbstractBody,
    Ground,
    SpatialBody,
    _body_rate_matrix,
    quaternion_rotation,
)
from ._quaternions import axis_angle, qconj, qmul, rotate


_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_KINDS = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}
_QPOS = {_FREE: 7, _BALL: 4, _SLIDE: 1, _HINGE: 1}
_QVEL = {_FREE: 6, _BALL: 3, _SLIDE: 1, _HINGE: 1}


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
            x = pos[p] + rotate(quat[p], jnp.asarray(self.body_pos[b], dtype))
            e = qmul(quat[p], jnp.asarray(self.body_quat[b], dtype))
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
            # Not a SpatialBody: a ChainBody (whose module imports this one), its
            # coordinates are its joints'.
            if not isinstance(frame, SpatialBody):
                out += [qpos[j.qposadr : j.qposadr + 1] for j in frame.joints]
                continue
            # The root body's frame is (x_in, e_in) in the group's principal
            # frame: the principal frame is the root's frame times its inverse.
            e_in = jnp.asarray(self.in_group_quat[b], qpos.dtype)
            x_in = jnp.asarray(self.in_group_pos[b], qpos.dtype)
            e = qmul(quat[b], qconj(e_in))
            out += [pos[b] - rotate(e, x_in), e]
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
                rate = rate.at[a : a + 4].set(0.5 * qmul(qpos[a : a + 4], omega))
            else:
                omega = jnp.concatenate([jnp.zeros(1, qvel.dtype), qvel[d + 3 : d + 6]])
                rate = rate.at[a : a + 3].set(qvel[d : d + 3])
                rate = rate.at[a + 3 : a + 7].set(
                    0.5 * qmul(qpos[a + 3 : a + 7], omega)
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
            pos.append(x_g + rotate(e_g, x_in))
            quat.append(qmul(e_g, e_in))
        return pos, quat

    def _joint_values(self, q, joints=None):
        pos, quat = self._frames_of_q(q)
        values = []
        for j in self.joints if joints is None else joints:
            if j.coordinate >= 0:  # a ChainBody's joint: a coordinate itself
                values.append(q[j.coordinate : j.coordinate + 1])
                continue
            b, p = j.body, self.parent[j.body]
            x0 = pos[p] + rotate(quat[p], jnp.asarray(self.body_pos[b], q.dtype))
            e0 = qmul(quat[p], jnp.asarray(self.body_quat[b], q.dtype))
            axis = jnp.asarray(j.axis, q.dtype)
            if j.kind == _HINGE:
                rel = qmul(qconj(e0), quat[b])
                sign = jnp.where(rel[0] < 0, -1.0, 1.0)
                angle = 2 * jnp.arctan2(sign * jnp.dot(rel[1:], axis), sign * rel[0])
                values.append(jnp.atleast_1d(angle + j.qpos0[0]))
            elif j.kind == _SLIDE:
                shift = jnp.dot(pos[b] - x0, rotate(e0, axis))
                values.append(jnp.atleast_1d(shift + j.qpos0[0]))
            elif j.kind == _BALL:
                values.append(qmul(qconj(e0), quat[b]))
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
                qvel = qvel.at[d : d + 3].set(2 * qmul(qconj(value), rate)[1:])
            else:
                qvel = qvel.at[d : d + 3].set(rate[:3])
                spin = 2 * qmul(qconj(value[3:]), rate[3:])[1:]
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
    anchor = x + rotate(e, anchor_local)
    if joint.kind == _SLIDE:
        return x + rotate(e, axis) * (value[0] - joint.qpos0[0]), e
    if joint.kind == _HINGE:
        e = qmul(e, axis_angle(axis, value[0] - joint.qpos0[0]))
    else:
        e = qmul(e, value / jnp.linalg.norm(value))
    return anchor - rotate(e, anchor_local), e


def _pose(frame, q):
    """World pose (position, quaternion) of a lagrax frame: the ground, a
    SpatialBody's principal frame or a ChainBody's."""
    if isinstance(frame, Ground):
        return jnp.zeros(3, q.dtype), jnp.array([1.0, 0.0, 0.0, 0.0], q.dtype)
    if isinstance(frame, SpatialBody):
        return q[frame.index : frame.index + 3], frame.quaternion(q)
    return frame.pose(q)


def _check_length(caller, name, x, size):
    if x.shape != (size,):
        raise ValueError(
            f"{caller}: {name} must have shape ({size},) (the MuJoCo model's), got "
            f"{x.shape}."
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
