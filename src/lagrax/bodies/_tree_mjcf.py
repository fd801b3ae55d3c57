"""A compiled MuJoCo model as a tree model: MuJoCo's qpos as coordinates, the
bodies' dynamics from `TreeLagrangian`, constraint rows only for unit
quaternions and loop-closing equalities. See docs/tree.md."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._custom_types import Params
from .._model import Model
from .._projection import AbstractClosedFormProjection
from .._system import System
from ._body import Value, resolve
from ._joint_space import _check_length
from ._joints import turn_rows
from ._kinematic_tree import (
    BALL,
    FREE,
    HINGE,
    QVEL_SIZE,
    SLIDE,
    KinematicTree,
    place,
)
from ._quaternions import qmul
from ._tree_dynamics import TreeLagrangian


_KIND = {0: FREE, 1: BALL, 2: SLIDE, 3: HINGE}


class TreeJointSpace(eqx.Module):
    """MuJoCo's (qpos, qvel) and a tree model's (q, qd): q is qpos; qd is its
    rate, whose quaternion parts are e_dot = e (0, omega) / 2 for the body-frame
    angular velocity omega in qvel (qvel = G(q) qd, the tree's `velocity_map`)."""

    tree: KinematicTree

    @property
    def nq(self) -> int:
        return self.tree.nq

    @property
    def nv(self) -> int:
        return self.tree.nv

    def _of(self, *kinds):
        tree = self.tree
        js = [j for j, k in enumerate(tree.kinds) if k in kinds]
        return (
            np.asarray([tree.qposadr[j] for j in js], int),
            np.asarray([tree.dofadr[j] for j in js], int),
        )

    def joint_velocities(self, q, qd) -> Array:
        """qvel at (q, qd): linear in qd."""
        return self.tree.velocity_map(q, qd)[0] @ qd

    def qpos_rate(self, qpos, qvel) -> Array:
        """qd at (qpos, qvel): the inverse of `joint_velocities` on |e| = 1."""
        rate = jnp.zeros(self.nq, qvel.dtype)
        adr, dof = self._of(HINGE, SLIDE)
        rate = rate.at[adr].set(qvel[dof])
        adr, dof = self._of(FREE)
        rate = rate.at[adr[:, None] + np.arange(3)].set(
            qvel[dof[:, None] + np.arange(3)]
        )
        for kind, shift in ((BALL, 0), (FREE, 3)):
            adr, dof = self._of(kind)
            if adr.size:
                e = qpos[adr[:, None] + shift + np.arange(4)]
                omega = qvel[dof[:, None] + shift + np.arange(3)]
                pure = jnp.concatenate([jnp.zeros_like(omega[:, :1]), omega], -1)
                rate = rate.at[adr[:, None] + shift + np.arange(4)].set(
                    0.5 * qmul(e, pure)
                )
        return rate

    def from_joint_space(self, qpos, qvel) -> tuple[Array, Array]:
        qpos, qvel = jnp.asarray(qpos, float), jnp.asarray(qvel, float)
        _check_length("from_joint_space", "qpos", qpos, self.nq)
        _check_length("from_joint_space", "qvel", qvel, self.nv)
        return qpos, self.qpos_rate(qpos, qvel)

    def to_joint_space(self, q, qd) -> tuple[Array, Array]:
        q, qd = jnp.asarray(q, float), jnp.asarray(qd, float)
        _check_length("to_joint_space", "q", q, self.nq)
        _check_length("to_joint_space", "qd", qd, self.nq)
        return q, self.joint_velocities(q, qd)


class _JointDamping(eqx.Module):
    """MuJoCo's joint damping: the generalized force -G^T (d * qvel), qvel = G qd."""

    tree: KinematicTree
    damping: tuple[tuple[int, Value], ...]  # (dof, value)

    def __call__(self, t, q, qd, params: Params) -> Array:
        dof = np.asarray([d for d, _ in self.damping], int)
        d = jnp.stack([resolve(v, params, q.dtype) for _, v in self.damping])
        g = self.tree.velocity_map(q, qd)[0][dof]
        return -(g.T @ (d * (g @ qd)))


class _TreeConstraints(AbstractClosedFormProjection):
    """Unit quaternions (|e|^2 - 1) and the loop closures: pins (a point of one
    body on a point of another: MuJoCo's connect, and the pin of a weld) and
    the welds' relative orientations (the antisymmetric part of O^T R_a^T R_b)."""

    tree: KinematicTree
    quaternions: tuple[int, ...] = eqx.field(static=True)
    # Pins: (body a, point in a's frame, body b, point in b's frame); -1 the world.
    pins: tuple[tuple[int, tuple[float, ...], int, tuple[float, ...]], ...] = eqx.field(
        static=True
    )
    # Welds' orientations: (body a, body b, O = R_a^T R_b held, row-major).
    turns: tuple[tuple[int, int, tuple[float, ...]], ...] = eqx.field(static=True)

    def project(self, t, q, qd, params: Params):
        """Without loop closures: each quaternion normalised, its rate's radial
        part removed (the mass-weighted projection: `TreeLagrangian`'s M maps
        a quaternion's radial direction to itself)."""
        if self.pins or self.turns:
            return None
        index = np.asarray(self.quaternions, int)[:, None] + np.arange(4)
        e, ed = q[index], qd[index]
        norm2 = jnp.sum(e * e, -1, keepdims=True)
        radial = jnp.sum(e * ed, -1, keepdims=True) / norm2
        n = q.shape[0]
        return (
            q + place(e / jnp.sqrt(norm2) - e, index, n),
            qd - place(radial * e, index, n),
        )

    def decoupled_rows(self) -> tuple[int, ...]:
        """The quaternions' norm rows (the last ones): `TreeLagrangian`'s M maps
        e to a multiple of itself, and the poses (the loop rows) do not depend
        on |e|."""
        loops = 3 * (len(self.pins) + len(self.turns))
        return tuple(range(loops, loops + len(self.quaternions)))

    def __call__(self, t, q, params: Params) -> Array:
        rows = []
        if self.pins or self.turns:
            rot, origin = self.tree.poses(q)
            rot = jnp.concatenate([rot, jnp.eye(3, dtype=q.dtype)[None]])
            origin = jnp.concatenate([origin, jnp.zeros((1, 3), q.dtype)])
        if self.pins:
            a = np.asarray([p[0] for p in self.pins])
            b = np.asarray([p[2] for p in self.pins])
            pa = jnp.asarray([p[1] for p in self.pins], q.dtype)
            pb = jnp.asarray([p[3] for p in self.pins], q.dtype)
            gap = (
                origin[a] + jnp.einsum("kij,kj->ki", rot[a], pa)
                - origin[b] - jnp.einsum("kij,kj->ki", rot[b], pb)
            )  # fmt: skip
            rows.append(gap.reshape(-1))
        if self.turns:
            a = np.asarray([w[0] for w in self.turns])
            b = np.asarray([w[1] for w in self.turns])
            held = jnp.asarray([w[2] for w in self.turns], q.dtype).reshape(-1, 3, 3)
            rel = jnp.swapaxes(held, -1, -2) @ jnp.swapaxes(rot[a], -1, -2) @ rot[b]
            rows.append(jax.vmap(turn_rows)(rel).reshape(-1))
        if self.quaternions:
            index = np.asarray(self.quaternions, int)[:, None] + np.arange(4)
            rows.append(jnp.sum(q[index] ** 2, -1) - 1)
        return jnp.concatenate(rows)


def _frame(pos, quat, mujoco):
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(quat, float))
    return rot.reshape(3, 3), np.asarray(pos, float)


def _compose(a, b):
    return a[0] @ b[0], a[1] + a[0] @ b[1]


def tree_model(mujoco, m, name: str, body_names, joint_names, equality_names):
    """The tree model of a compiled MjModel `m` (checked by the caller)."""
    from ..systems._drawing import cabinet

    nbody = m.nbody
    parent_of = [int(p) for p in m.body_parentid]
    joints_of: list[list[int]] = [[] for _ in range(nbody)]
    for j in range(m.njnt):
        joints_of[int(m.jnt_bodyid[j])].append(j)

    # Groups: a body with joints starts one; a body without joints is welded
    # to its parent's group (-1: the world).
    group = [-1] * nbody
    roots: list[int] = []
    for b in range(1, nbody):
        if joints_of[b]:
            group[b] = len(roots)
            roots.append(b)
        else:
            group[b] = group[parent_of[b]]

    local = [_frame(m.body_pos[b], m.body_quat[b], mujoco) for b in range(nbody)]
    identity = (np.eye(3), np.zeros(3))

    def in_group_frame(b):
        """Body b's frame (after its joints, if it is its group's root) in its
        group's frame (the root's, or the world's)."""
        if b == 0 or (group[b] >= 0 and roots[group[b]] == b):
            return identity
        return _compose(in_group_frame(parent_of[b]), local[b])

    # Depth order: parents before children, MuJoCo's order within a depth.
    depth = []
    for b in roots:
        g, d = group[parent_of[b]], 0
        while g >= 0:
            d, g = d + 1, group[parent_of[roots[g]]]
        depth.append(d)
    order = sorted(range(len(roots)), key=lambda g: (depth[g], g))
    slot_of = {g: k for k, g in enumerate(order)}
    nb = len(roots)

    parent, offset_rot, offset_pos = [], [], []
    levels: dict[int, list[int]] = {}
    for k, g in enumerate(order):
        b = roots[g]
        levels.setdefault(depth[g], []).append(k)
        pg = group[parent_of[b]]
        parent.append(-1 if pg < 0 else slot_of[pg])
        first = int(m.jnt_type[joints_of[b][0]])
        if _KIND[first] == FREE:
            rot, pos = identity
        else:
            rot, pos = _compose(in_group_frame(parent_of[b]), local[b])
        offset_rot.append(rot)
        offset_pos.append(pos)

    # Joints, in MuJoCo's order; per body its joints in order (padded).
    kinds = tuple(_KIND[int(k)] for k in m.jnt_type)
    width = max(len(joints_of[b]) for b in roots) if roots else 0
    slots = tuple(
        tuple(joints_of[roots[g]] + [-1] * (width - len(joints_of[roots[g]])))
        for g in order
    )
    tree = KinematicTree(
        parent=tuple(parent),
        levels=tuple((min(ks), max(ks) + 1) for _, ks in sorted(levels.items())),
        offset_rot=tuple(np.ravel(offset_rot).tolist()),
        offset_pos=tuple(np.ravel(offset_pos).tolist()),
        kinds=kinds,
        qposadr=tuple(int(a) for a in m.jnt_qposadr),
        ref=tuple(float(m.qpos0[a]) for a in m.jnt_qposadr),
        axis=tuple(np.ravel(m.jnt_axis).tolist()),
        anchor=tuple(np.ravel(m.jnt_pos).tolist()),
        slots=slots,
        nq=int(m.nq),
        dofadr=tuple(int(d) for d in m.jnt_dofadr),
        nv=int(m.nv),
    )

    # Each group's mass, mass centre and principal frame in the group's frame.
    params: dict[str, Any] = {}
    masses, inertias, com, principal = [], [], [], []
    for g in order:
        members = [b for b in range(1, nbody) if group[b] == g]
        total, moment, tensor = 0.0, np.zeros(3), np.zeros((3, 3))
        placed = []
        for b in members:
            rot, pos = in_group_frame(b)
            irot, ipos = _compose(
                (rot, pos), _frame(m.body_ipos[b], m.body_iquat[b], mujoco)
            )
            placed.append((b, irot, ipos))
            total += m.body_mass[b]
            moment += m.body_mass[b] * ipos
        centre = moment / total
        for b, irot, ipos in placed:
            d = ipos - centre
            tensor += irot @ np.diag(m.body_inertia[b]) @ irot.T
            tensor += m.body_mass[b] * (d @ d * np.eye(3) - np.outer(d, d))
        moments, axes = np.linalg.eigh(tensor)
        if np.linalg.det(axes) < 0:
            axes[:, 0] = -axes[:, 0]
        key = body_names[roots[g]]
        params[f"{key}.mass"] = float(total)
        params[f"{key}.inertia"] = np.asarray(moments, float)
        masses.append(f"{key}.mass")
        inertias.append(f"{key}.inertia")
        com.append(centre)
        principal.append(axes)

    space = TreeJointSpace(tree)
    quaternions = []
    damping, armature, springs, limits = [], [], [], {}
    for j in range(m.njnt):
        kind = kinds[j]
        adr = int(m.jnt_qposadr[j])
        if kind in (BALL, FREE):
            quaternions.append(adr + (3 if kind == FREE else 0))
        if m.jnt_limited[j]:
            limits[joint_names[j]] = tuple(float(x) for x in m.jnt_range[j])
        for d in range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + QVEL_SIZE[kind]):
            if m.dof_damping[d] != 0:
                params[f"{joint_names[j]}.damping"] = float(m.dof_damping[d])
                damping.append((d, f"{joint_names[j]}.damping"))
            if m.dof_armature[d] != 0:
                params[f"{joint_names[j]}.armature"] = float(m.dof_armature[d])
                armature.append((d, f"{joint_names[j]}.armature"))
        if m.jnt_stiffness[j] != 0:
            params[f"{joint_names[j]}.stiffness"] = float(m.jnt_stiffness[j])
            springs.append(
                (adr, f"{joint_names[j]}.stiffness", float(m.qpos_spring[adr]))
            )

    # The radial coefficient of a quaternion: four times the mean principal
    # moment of the body it turns (the scale of M's other eigenvalues there).
    radial = []
    for j in range(m.njnt):
        if kinds[j] in (BALL, FREE):
            g = group[int(m.jnt_bodyid[j])]
            radial.append(4 * float(np.mean(params[inertias[order.index(g)]])) + 1e-12)

    gravity = None
    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = tuple(float(x) for x in m.opt.gravity)
    lagrangian = TreeLagrangian(
        tree=tree,
        com=tuple(np.ravel(com).tolist()),
        principal=tuple(np.ravel(principal).tolist()),
        masses=tuple(masses),
        inertias=tuple(inertias),
        gravity=gravity,
        quaternions=tuple(quaternions),
        radial=tuple(radial),
        armature=tuple(armature),
        springs=tuple(springs),
        body_names=tuple(body_names[roots[g]] for g in order),
    )

    # Loop closures, at the reference configuration (qpos0).
    data = mujoco.MjData(m)
    data.qpos[:] = m.qpos0
    mujoco.mj_kinematics(m, data)

    def body_slot(b):
        return nb if group[b] < 0 else slot_of[group[b]]

    def frame_world(b):
        g = group[b]
        if g < 0:
            return identity
        r = roots[g]
        return data.xmat[r].reshape(3, 3), data.xpos[r].copy()

    def point_in(b, world):
        rot, pos = frame_world(b)
        return tuple(float(x) for x in rot.T @ (world - pos))

    pins, turns, labels = [], [], []
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        label = equality_names[e]
        if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_CONNECT):
            world = data.xpos[b1] + data.xmat[b1].reshape(3, 3) @ m.eq_data[e, :3]
        else:
            world = data.xpos[b2] + data.xmat[b2].reshape(3, 3) @ m.eq_data[e, :3]
            rel = frame_world(b1)[0].T @ frame_world(b2)[0]
            turns.append((body_slot(b1), body_slot(b2), tuple(np.ravel(rel).tolist())))
        pins.append(
            (body_slot(b1), point_in(b1, world), body_slot(b2), point_in(b2, world))
        )
        labels.append([f"{label} {c}" for c in "xyz"])
    pin_labels = [x for rows in labels for x in rows]
    turn_labels = [
        f"{equality_names[e]} turn {c}"
        for e in range(m.neq)
        if m.eq_active0[e] and int(m.eq_type[e]) != int(mujoco.mjtEq.mjEQ_CONNECT)
        for c in "xyz"
    ]
    quat_labels = [
        f"|e|=1 {joint_names[j]}" for j in range(m.njnt) if kinds[j] in (BALL, FREE)
    ]
    constraints = None
    if pins or quaternions:
        constraints = _TreeConstraints(
            tree, tuple(quaternions), tuple(pins), tuple(turns)
        )
    forces = _JointDamping(tree, tuple(damping)) if damping else None
    system = System(lagrangian, constraints, forces)

    coordinates, units = [], []
    for j in range(m.njnt):
        kind, jn = kinds[j], joint_names[j]
        if kind == HINGE:
            coordinates.append(jn)
            units.append("rad")
        elif kind == SLIDE:
            coordinates.append(jn)
            units.append("m")
        elif kind == BALL:
            coordinates += [f"{jn}.{c}" for c in ("w", "e1", "e2", "e3")]
            units += ["1"] * 4
        else:
            coordinates += [f"{jn}.{c}" for c in ("x", "y", "z", "w", "e1", "e2", "e3")]
            units += ["m"] * 3 + ["1"] * 4
    assert len(coordinates) == m.nq

    def points(t, q, p):
        _, origin = tree.poses(q)
        return jnp.stack(
            [cabinet(jnp.zeros(3, q.dtype))] + [cabinet(x) for x in origin]
        )

    segments = tuple((parent[k] + 1, k + 1) for k in range(nb))
    return Model(
        name=name,
        description=f"{name}: read from MJCF ({nb} bodies, {m.njnt} joints, "
        f"{m.neq} equality constraints; joint coordinates)",
        system=system,
        params=params,
        coordinates=tuple(coordinates),
        units=tuple(units),
        constraint_names=tuple(pin_labels + turn_labels + quat_labels),
        q_guess=tuple(float(x) for x in m.qpos0),
        qd_guess=(0.0,) * int(m.nq),
        points=points,
        segments=segments,
        joint_space=space,
        joint_limits=tuple(limits.items()),
    )
