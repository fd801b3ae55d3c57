"""`KinematicTree`: rigid bodies in a tree, moved by their joints' values.

Forward kinematics in one pass: every joint's transform in one vectorised kernel
per joint kind (they depend on the joint's own value only), each body's
transform from its parent as the product of its offset and its joints', then
the bodies' world poses level by level from the root (bodies of one depth at
once, as MJX does). Program size grows with the tree's depth and the most
joints on one body, not with the number of bodies. See docs/tree.md.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


HINGE, SLIDE, BALL, FREE = "hinge", "slide", "ball", "free"
QPOS_SIZE = {HINGE: 1, SLIDE: 1, BALL: 4, FREE: 7}
QVEL_SIZE = {HINGE: 1, SLIDE: 1, BALL: 3, FREE: 6}


def _array(x, dtype, shape):
    return jnp.asarray(np.asarray(x, float).reshape(shape), dtype)


def quaternion_matrix(e) -> Float[Array, "*batch 3 3"]:
    """Rotation matrices of quaternions e = (w, x, y, z), normalised first (as
    MuJoCo normalises them), batched over leading axes."""
    e = e / jnp.linalg.norm(e, axis=-1, keepdims=True)
    w, x, y, z = e[..., 0], e[..., 1], e[..., 2], e[..., 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def matmul(a, b) -> Array:
    """a @ b for small matrices (..., 3, 3) as a broadcast product and a sum,
    which XLA fuses with its neighbours; a `dot` of 3 x 3 blocks is a kernel
    of its own on the CPU, and tiny kernels' overheads dominate here."""
    return sum(a[..., :, k : k + 1] * b[..., k : k + 1, :] for k in range(3))


def one_hot(index, size: int, dtype) -> Array:
    """The static 0/1 array (*index.shape, size) that places values at `index`
    (einsum with it instead of `.at[index].set/add`: XLA on the CPU runs a
    scatter as a loop over its elements, a contraction as one kernel)."""
    return jnp.asarray(np.eye(size)[np.asarray(index, int)], dtype)


def place(values, index, size: int) -> Array:
    """The vector (size,) that holds `values` at the static `index` (same
    shape) and zeros elsewhere: `zeros(size).at[index].add(values)` as one
    contraction (`one_hot`)."""
    at = one_hot(index, size, values.dtype)
    return jnp.tensordot(values, at, axes=values.ndim)


def matvec(a, v) -> Array:
    """a @ v for small matrices (..., 3, 3), fused like `matmul`."""
    return sum(a[..., :, k] * v[..., k : k + 1] for k in range(3))


def cross_motion(a, b) -> Array:
    """Spatial cross products of motion vectors (omega, v) (..., 6): the rate
    of a motion vector b carried by a frame that moves with a."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return jnp.concatenate(
        [jnp.cross(wa, wb), jnp.cross(wa, vb) + jnp.cross(va, wb)], axis=-1
    )


def _axis_rotation(axis, angle):
    """Rodrigues: rotation by `angle` (k,) about unit `axis` (k, 3)."""
    x, y, z = axis[:, 0], axis[:, 1], axis[:, 2]
    zero = jnp.zeros_like(x)
    k = jnp.stack(
        [
            jnp.stack([zero, -z, y], -1),
            jnp.stack([z, zero, -x], -1),
            jnp.stack([-y, x, zero], -1),
        ],
        -2,
    )
    s, c = jnp.sin(angle)[:, None, None], jnp.cos(angle)[:, None, None]
    return jnp.eye(3, dtype=axis.dtype) + s * k + (1 - c) * matmul(k, k)


class KinematicTree(eqx.Module):
    """A tree of rigid bodies moved by hinges, slides, ball and free joints, in
    joint coordinates: q is MuJoCo's qpos (a hinge's angle, a slide's
    displacement, a ball's unit quaternion, a free joint's position and unit
    quaternion).

    Bodies are numbered by depth (parents before children). Each body's frame
    is its parent's frame times a fixed offset times its joints' transforms, in
    order; a joint turns or slides the frame about or along its axis through its
    anchor, both given in the body's frame as the joints before it left it
    (MuJoCo's convention); a hinge or slide measures from its reference value.
    A free joint sets the body's world pose (its body hangs from the world, with
    no offset).

    All geometry is static (numbers, not parameters). Built by
    [`lagrax.bodies.from_mjcf`][].
    """

    parent: tuple[int, ...] = eqx.field(static=True)  # -1: the world
    levels: tuple[tuple[int, int], ...] = eqx.field(static=True)  # body slices
    offset_rot: tuple[float, ...] = eqx.field(static=True)  # (nb, 3, 3)
    offset_pos: tuple[float, ...] = eqx.field(static=True)  # (nb, 3)
    # Joints, in MuJoCo's order: kind, first index in q, reference value,
    # axis and anchor in the body's frame.
    kinds: tuple[str, ...] = eqx.field(static=True)
    qposadr: tuple[int, ...] = eqx.field(static=True)
    ref: tuple[float, ...] = eqx.field(static=True)
    axis: tuple[float, ...] = eqx.field(static=True)  # (nj, 3)
    anchor: tuple[float, ...] = eqx.field(static=True)  # (nj, 3)
    # Per body: its joints, in order, as indices into the joints (-1: none).
    slots: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    dofadr: tuple[int, ...] = eqx.field(static=True)  # per joint, in qvel
    nv: int = eqx.field(static=True)

    @property
    def num_bodies(self) -> int:
        return len(self.parent)

    def _joint_transforms(self, q):
        """Every joint's transform (rotation, translation), grouped by kind in
        one kernel each, in the order of `_table_index`; an identity last."""
        dtype = q.dtype
        nj = len(self.kinds)
        axis = _array(self.axis, dtype, (nj, 3))
        anchor = _array(self.anchor, dtype, (nj, 3))
        adr = np.asarray(self.qposadr, int)
        ref = np.asarray(self.ref, float)
        rots, shifts = [], []
        for kind in (HINGE, SLIDE, BALL, FREE):
            (js,) = np.nonzero(np.asarray(self.kinds) == kind)
            if js.size == 0:
                continue
            if kind == HINGE:
                angle = q[adr[js]] - jnp.asarray(ref[js], dtype)
                rot = _axis_rotation(axis[js], angle)
                shift = anchor[js] - matvec(rot, anchor[js])
            elif kind == SLIDE:
                rot = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (js.size, 3, 3))
                shift = axis[js] * (q[adr[js]] - jnp.asarray(ref[js], dtype))[:, None]
            elif kind == BALL:
                rot = quaternion_matrix(q[adr[js][:, None] + np.arange(4)])
                shift = anchor[js] - matvec(rot, anchor[js])
            else:
                rot = quaternion_matrix(q[adr[js][:, None] + 3 + np.arange(4)])
                shift = q[adr[js][:, None] + np.arange(3)]
            rots.append(rot)
            shifts.append(shift)
        rots.append(jnp.eye(3, dtype=dtype)[None])
        shifts.append(jnp.zeros((1, 3), dtype))
        return jnp.concatenate(rots), jnp.concatenate(shifts)

    def _table_index(self) -> np.ndarray:
        """Per body and slot: the row of `_joint_transforms` (the identity for
        an empty slot)."""
        kinds = np.asarray(self.kinds)
        order = np.concatenate(
            [np.nonzero(kinds == k)[0] for k in (HINGE, SLIDE, BALL, FREE)]
        ).astype(int)
        row = np.empty(len(kinds), int)
        row[order] = np.arange(len(kinds))
        slots = np.asarray(self.slots, int).reshape(self.num_bodies, -1)
        return np.where(slots < 0, len(kinds), row[np.maximum(slots, 0)])

    def _local(self, q):
        """Per body its transform from its parent (offset, then its joints)
        and, per slot, the transform before that slot's joint; the joints'
        own transforms (table rows)."""
        dtype = q.dtype
        nb = self.num_bodies
        rot = _array(self.offset_rot, dtype, (nb, 3, 3))
        pos = _array(self.offset_pos, dtype, (nb, 3))
        before = []
        joint_rot = joint_shift = None
        if self.kinds:
            joint_rot, joint_shift = self._joint_transforms(q)
            table = self._table_index()
            for k in range(table.shape[1]):
                before.append((rot, pos))
                pos = pos + matvec(rot, joint_shift[table[:, k]])
                rot = matmul(rot, joint_rot[table[:, k]])
        return rot, pos, before, joint_rot

    def _world(self, rot, pos):
        """World poses from the parents' transforms, level by level."""
        parent = np.asarray(self.parent, int)
        rots, poss = [], []
        for start, stop in self.levels:
            r, p = rot[start:stop], pos[start:stop]
            if parent[start] >= 0:  # a level below the roots: parents are known
                done_rot, done_pos = jnp.concatenate(rots), jnp.concatenate(poss)
                up = parent[start:stop]
                p = done_pos[up] + matvec(done_rot[up], p)
                r = matmul(done_rot[up], r)
            rots.append(r)
            poss.append(p)
        return jnp.concatenate(rots), jnp.concatenate(poss)

    def poses(self, q) -> tuple[Float[Array, "nb 3 3"], Float[Array, "nb 3"]]:
        """Every body's world pose: rotation (body frame -> world) and origin."""
        rot, pos, _, _ = self._local(q)
        return self._world(rot, pos)

    def joint_frames(self, q):
        """Every body's world pose, and every joint's world frame before it
        moves (rotation (nj, 3, 3), origin (nj, 3)) and its own rotation
        (nj, 3, 3), joints in MuJoCo's order."""
        rot, pos, before, joint_rot = self._local(q)
        body_rot, body_pos = self._world(rot, pos)
        dtype = q.dtype
        # The parents' world poses (the world's for the roots).
        up = np.asarray(self.parent, int)
        up = np.where(up < 0, self.num_bodies, up)
        up_rot = jnp.concatenate([body_rot, jnp.eye(3, dtype=dtype)[None]])[up]
        up_pos = jnp.concatenate([body_pos, jnp.zeros((1, 3), dtype)])[up]
        slots = np.asarray(self.slots, int).reshape(self.num_bodies, -1)
        body_of, slot_of = np.nonzero(slots >= 0)
        order = np.argsort(slots[body_of, slot_of])  # MuJoCo's joint order
        body_of, slot_of = body_of[order], slot_of[order]
        local_rot = jnp.stack([r for r, _ in before], 1)[body_of, slot_of]
        local_pos = jnp.stack([p for _, p in before], 1)[body_of, slot_of]
        before_rot = matmul(up_rot[body_of], local_rot)
        before_pos = up_pos[body_of] + matvec(up_rot[body_of], local_pos)
        own_rot = joint_rot[self._table_index()[body_of, slot_of]]
        return body_rot, body_pos, before_rot, before_pos, own_rot

    def motions(self, q):
        """Every dof's spatial motion S (nv, 6) in world terms (Plucker
        coordinates about the world origin: (u, r x u) for a turn about u
        through r, (0, u) for a slide along u) and every body's world pose
        (rotation (nb, 3, 3), origin (nb, 3)), with their derivatives in q
        from the motions themselves (no autodiff through the kinematics)."""
        return _motions(self, q)

    def dofs(self):
        """Static per-dof tables (numpy): the joint of each dof, whether it
        turns (else slides), where its direction comes from (0: the joint's
        axis, 1: a column of the frame after the joint, 2: a world axis), which
        column, and its point (0: the anchor, 1: the frame's origin after the
        joint); per body the dofs that move it (nb, nv), and per dof the dofs
        that move the frame its direction is fixed in (nv, nv)."""
        nv = self.nv
        joint = np.zeros(nv, int)
        turns = np.zeros(nv, bool)
        source = np.zeros(nv, int)
        column = np.zeros(nv, int)
        point = np.zeros(nv, int)
        for j, kind in enumerate(self.kinds):
            d = self.dofadr[j]
            joint[d : d + QVEL_SIZE[kind]] = j
            if kind in (HINGE, SLIDE):
                turns[d] = kind == HINGE
            elif kind == BALL:
                turns[d : d + 3] = True
                source[d : d + 3] = 1
                column[d : d + 3] = np.arange(3)
            else:
                source[d : d + 3] = 2
                column[d : d + 3] = np.arange(3)
                turns[d + 3 : d + 6] = True
                source[d + 3 : d + 6] = 1
                column[d + 3 : d + 6] = np.arange(3)
                point[d + 3 : d + 6] = 1
        slots = np.asarray(self.slots, int).reshape(self.num_bodies, -1)
        own = [[] for _ in range(self.num_bodies)]  # per body: dofs by slot
        for b in range(self.num_bodies):
            for j in slots[b]:
                if j >= 0:
                    d = self.dofadr[j]
                    own[b].append(list(range(d, d + QVEL_SIZE[self.kinds[j]])))
        path = np.zeros((self.num_bodies, nv), bool)
        for b in range(self.num_bodies):  # parents come first
            if self.parent[b] >= 0:
                path[b] = path[self.parent[b]]
            for dofs in own[b]:
                path[b, dofs] = True
        carrier = np.zeros((nv, nv), bool)
        for b in range(self.num_bodies):
            above = path[self.parent[b]] if self.parent[b] >= 0 else np.zeros(nv, bool)
            done = above.copy()
            for k, j in enumerate(j for j in slots[b] if j >= 0):
                done[own[b][k]] = True
                for d in own[b][k]:
                    carrier[d] = done
                if self.kinds[j] == FREE:  # the world's axes carry its slides
                    carrier[own[b][k][:3]] = False
        return joint, turns, source, column, point, path, carrier

    def velocity_map(self, q, qd) -> tuple[Array, Array]:
        """G(q), (nv, nq), with qvel = G qd (a ball's or free joint's
        body-frame angular velocity 2 H(e) edot / |e|^2 from its quaternion's
        rate), and G'(q, qd) qd, the rest of d/dt qvel = G qdd + G' qd."""
        const = np.zeros((self.nv, self.nq))
        starts, dofs = [], []
        for j, kind in enumerate(self.kinds):
            a, d = self.qposadr[j], self.dofadr[j]
            if kind in (HINGE, SLIDE):
                const[d, a] = 1.0
                continue
            if kind == FREE:
                const[d + np.arange(3), a + np.arange(3)] = 1.0
                a, d = a + 3, d + 3
            starts.append(a)
            dofs.append(d)
        g = jnp.asarray(const, q.dtype)
        rate_bias = jnp.zeros(self.nv, q.dtype)
        if not starts:
            return g, rate_bias
        index = np.asarray(starts)[:, None] + np.arange(4)
        rows = np.asarray(dofs)[:, None] + np.arange(3)
        e, ed = q[index], qd[index]
        w, x, y, z = e[:, 0], e[:, 1], e[:, 2], e[:, 3]
        h = jnp.stack(
            [
                jnp.stack([-x, w, z, -y], -1),
                jnp.stack([-y, -z, w, x], -1),
                jnp.stack([-z, y, -x, w], -1),
            ],
            -2,
        )  # (k, 3, 4): H(e), with H(e) e = 0 and H(edot) edot = 0
        norm2 = jnp.sum(e * e, -1)[:, None]
        h_ed = jnp.sum(h * ed[:, None, :], -1)
        at_rows = one_hot(rows, self.nv, q.dtype)  # (k, 3, nv)
        at_index = one_hot(index, self.nq, q.dtype)  # (k, 4, nq)
        g = g + jnp.einsum(
            "kir,kij,kjc->rc", at_rows, 2 * h / norm2[..., None], at_index
        )
        gain = -4 * jnp.sum(e * ed, -1)[:, None] / norm2**2
        return g, rate_bias + place(gain * h_ed, rows, self.nv)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _motions(tree: KinematicTree, q):
    """`KinematicTree.motions` (its derivatives: `_motions_jvp`)."""
    dtype = q.dtype
    joint, turns, source, column, point, _, _ = tree.dofs()
    body_rot, body_pos, before_rot, before_pos, own_rot = tree.joint_frames(q)
    nj = len(tree.kinds)
    # Every dof's motion in world terms (Plucker coordinates about the world
    # origin): S = (u, r x u) for a turn about u through r, (0, u) for a slide
    # along u.
    axis = _array(tree.axis, dtype, (nj, 3))
    anchor = _array(tree.anchor, dtype, (nj, 3))
    after_rot = matmul(before_rot, own_rot)
    after_pos = before_pos + matvec(before_rot, anchor) - matvec(after_rot, anchor)
    free = np.asarray([k == FREE for k in tree.kinds])
    if free.any():  # a free joint's frame origin is its position
        adr = np.where(free, np.asarray(tree.qposadr, int), 0)
        after_pos = jnp.where(free[:, None], q[adr[:, None] + np.arange(3)], after_pos)
    world_axis = matvec(before_rot, axis)[joint]
    world_anchor = (before_pos + matvec(before_rot, anchor))[joint]
    frame_column = after_rot[joint, :, column]
    unit = jnp.eye(3, dtype=dtype)[column]
    u = jnp.where(
        (source == 0)[:, None],
        world_axis,
        jnp.where((source == 1)[:, None], frame_column, unit),
    )
    r = jnp.where((point == 0)[:, None], world_anchor, after_pos[joint])
    spin = jnp.where(turns[:, None], u, 0.0)
    motion = jnp.concatenate([spin, jnp.where(turns[:, None], jnp.cross(r, u), u)], 1)
    return motion, body_rot, body_pos


@_motions.defjvp
def _motions_jvp(tree: KinematicTree, primals, tangents):
    """A displacement dtheta = G(q) dq of the dofs moves everything that dof j
    carries by the spatial motion S_j dtheta_j: the bodies below it (path) and
    the directions of the dofs whose frame it moves (carrier). So dS_k = (sum_j
    C_kj S_j dtheta_j) x S_k, dR_b = [w_b]x R_b and dp_b = w_b x p_b + v_b with
    (w_b, v_b) = sum_j P_bj S_j dtheta_j: a few products, linear in dq, which
    reverse mode transposes as they are (instead of transposing the forward
    kinematics' gathers and level-by-level products; Carpentier and Mansard,
    "Analytical derivatives of rigid body dynamics algorithms", RSS 2018, use
    the same motion-subspace derivatives)."""
    (q,), (dq,) = primals, tangents
    motion, rot, pos = _motions(tree, q)
    _, _, _, _, _, path, carrier = tree.dofs()
    dtype = q.dtype
    velocity_map, _ = tree.velocity_map(q, jnp.zeros_like(q))
    twist = motion * (velocity_map @ dq)[:, None]  # (nv, 6)
    moved = jnp.asarray(path, dtype) @ twist  # (nb, 6)
    carried = jnp.asarray(carrier, dtype) @ twist  # (nv, 6)
    w, v = moved[:, :3], moved[:, 3:]
    d_rot = jnp.cross(w[:, :, None], rot, axisa=1, axisb=1, axisc=1)
    d_pos = jnp.cross(w, pos) + v
    return (motion, rot, pos), (cross_motion(carried, motion), d_rot, d_pos)
