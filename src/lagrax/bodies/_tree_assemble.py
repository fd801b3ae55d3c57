"""`assemble_tree`: a mechanism from parts in joint coordinates.

The joints that form a spanning tree of the bodies become coordinates (a
revolute's angle, a slider's travel, a ball's relative quaternion; a weld
none); every other joint closes a loop and stays as constraint rows. Each
body's absolute coordinates are a map x = A(q, params) of the joint values,
composed parent to child, and the mechanism in q is the absolute one seen
through A (the velocity transformation of multibody dynamics: Jalon & Bayo,
*Kinematic and Dynamic Simulation of Multibody Systems*, 1994, ch. 7):

    M_q = J^T M_x J,   f_q = J^T (f_x - M_x Jdot qd),   J = dA/dq,

with M_x the bodies' block-diagonal mass matrix and f_x their forces (see
`assemble`); loads and loop joints are the absolute ones evaluated at A(q).
See docs/tree.md.
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._custom_types import Params
from .._mechanics import AbstractLagrangian, lagrangian_terms
from .._projection import AbstractClosedFormProjection
from .._system import System
from ._assemble import _check_layout, _Forces, _Lagrangian
from ._batching import Batched
from ._body import (
    AbstractBody,
    Ground,
    PlanarBody,
    SpatialBody,
    Value,
    _local,
    resolve,
    rotate_2d,
)
from ._joints import (
    AbstractJoint,
    Fixed,
    Hinge,
    Prismatic,
    Revolute,
    SpatialPrismatic,
    Weld,
)
from ._loads import AbstractLoad
from ._quaternions import qconj, qmul


_IDENTITY = (1.0, 0.0, 0.0, 0.0)
_QUAT = ("w", "e1", "e2", "e3")


def _matrix_quaternion(rot) -> Array:
    """The unit quaternion of a rotation matrix (Shepperd's method: the branch
    of the largest of w^2, x^2, y^2, z^2), sign w >= 0 where w is largest."""
    r = rot
    trace = r[0, 0] + r[1, 1] + r[2, 2]
    candidates = jnp.stack(
        [
            jnp.stack(
                [1 + trace, r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]
            ),
            jnp.stack(
                [r[2, 1] - r[1, 2], 1 + 2 * r[0, 0] - trace, r[0, 1] + r[1, 0],
                 r[0, 2] + r[2, 0]]
            ),
            jnp.stack(
                [r[0, 2] - r[2, 0], r[0, 1] + r[1, 0], 1 + 2 * r[1, 1] - trace,
                 r[1, 2] + r[2, 1]]
            ),
            jnp.stack(
                [r[1, 0] - r[0, 1], r[0, 2] + r[2, 0], r[1, 2] + r[2, 1],
                 1 + 2 * r[2, 2] - trace]
            ),
        ]
    )  # fmt: skip
    best = jnp.argmax(jnp.stack([trace, r[0, 0], r[1, 1], r[2, 2]]))
    e = candidates[best]
    return e / jnp.linalg.norm(e)


def _between(from_axis, to_axis) -> Array:
    """The quaternion of the least rotation that takes unit `from_axis` to unit
    `to_axis` (half a turn about a perpendicular axis where they are opposite)."""
    w = 1 + jnp.sum(from_axis * to_axis)
    v = jnp.cross(from_axis, to_axis)
    helper = jnp.eye(3, dtype=from_axis.dtype)[jnp.argmin(jnp.abs(from_axis))]
    across = jnp.cross(from_axis, helper)
    # Exactly (to round-off) opposite: no least rotation; half a turn about a
    # perpendicular. Nearly opposite axes keep the formula, which stays exact.
    opposite = (w < 1e-12) & (jnp.sum(v * v) < 1e-24)
    e = jnp.where(
        opposite,
        jnp.concatenate([jnp.zeros(1, w.dtype), across]),
        jnp.concatenate([w[None], v]),
    )
    return e / jnp.linalg.norm(e)


def _rotate(e, v) -> Array:
    """v turned by the unit quaternion e = (w, u): v + 2 w u x v + 2 u x (u x v),
    element-wise (a 3 x 3 matrix product would be a kernel of its own, and
    many of them, transposed and batched over tangents, cost more than the
    arithmetic)."""
    w, u = e[0], e[1:]
    t = 2 * jnp.cross(u, v)
    return v + w * t + jnp.cross(u, t)


def _unit(value: Value, params, dtype, what: str, dim: int = 3) -> Array:
    axis = resolve(value, params, dtype)
    if axis.shape != (dim,):
        raise ValueError(
            f"assemble_tree: {what} must have shape ({dim},), got {axis.shape}."
        )
    return axis / jnp.linalg.norm(axis)


# -- One joint of the tree ------------------------------------------------------


# How many joint coordinates each kind of tree joint owns.
_SIZE = {
    Revolute: 1, Prismatic: 1, Fixed: 0, Hinge: 1, SpatialPrismatic: 1, Weld: 0,
}  # fmt: skip


def _joint_size(joint, dim: int) -> int:
    if type(joint) is Revolute and dim == 3:
        return 4  # a ball joint: the relative quaternion
    return _SIZE[type(joint)]


def _relative(joint, dim: int, v, params, dtype):
    """The joint's transform from a's frame to b's at its values v: planar
    (phi, d) with theta_b = theta_a + phi and r_b = r_a + R(theta_a) d; spatial
    (c, d) with e_b = e_a c and r_b = r_a + R(e_a) d."""
    point_a = _local(joint.point_a, params, dtype, dim)
    point_b = _local(joint.point_b, params, dtype, dim)
    kind = type(joint)
    if dim == 2:
        if kind is Revolute:
            phi = v[0]
            slide = jnp.zeros(2, dtype)
        else:  # Prismatic, Fixed
            phi = resolve(joint.angle, params, dtype)
            slide = jnp.zeros(2, dtype)
            if kind is Prismatic:
                axis = _unit(joint.axis, params, dtype, "a slider's axis", 2)
                slide = v[0] * axis
        return phi, point_a + slide - rotate_2d(phi, point_b)
    slide = jnp.zeros(3, dtype)
    if kind is Revolute:
        c = v / jnp.linalg.norm(v)
    elif kind is Hinge:
        axis_a = _unit(joint.axis_a, params, dtype, "a hinge's axis_a")
        axis_b = _unit(joint.axis_b, params, dtype, "a hinge's axis_b")
        turn = jnp.concatenate([jnp.cos(v[:1] / 2), jnp.sin(v[0] / 2) * axis_a])
        c = qmul(turn, _between(axis_b, axis_a))
    else:  # SpatialPrismatic, Weld
        if joint.orientation is None:
            c = jnp.asarray(_IDENTITY, dtype)
        else:
            c = _matrix_quaternion(resolve(joint.orientation, params, dtype))
        if kind is SpatialPrismatic:
            slide = v[0] * _unit(joint.axis, params, dtype, "a slider's axis")
    return c, point_a + slide - _rotate(c, point_b)


def _values(joint, dim: int, frame_a, frame_b, params, dtype) -> Array:
    """The inverse of `_relative`: the joint's values from the poses of a and
    b, (angle, centre) planar or (quaternion, centre) spatial."""
    (turn_a, r_a), (turn_b, r_b) = frame_a, frame_b
    point_a = _local(joint.point_a, params, dtype, dim)
    point_b = _local(joint.point_b, params, dtype, dim)
    kind = type(joint)
    if _joint_size(joint, dim) == 0:
        return jnp.zeros(0, dtype)
    if dim == 2:
        if kind is Revolute:
            return jnp.atleast_1d(turn_b - turn_a)
        gap = r_b + rotate_2d(turn_b, point_b) - r_a - rotate_2d(turn_a, point_a)
        axis = _unit(joint.axis, params, dtype, "a slider's axis", 2)
        return jnp.atleast_1d(jnp.sum(rotate_2d(-turn_a, gap) * axis))
    relative = qmul(qconj(turn_a), turn_b)
    if kind is Revolute:
        return relative
    if kind is Hinge:
        axis_a = _unit(joint.axis_a, params, dtype, "a hinge's axis_a")
        axis_b = _unit(joint.axis_b, params, dtype, "a hinge's axis_b")
        turn = qmul(relative, qconj(_between(axis_b, axis_a)))
        return jnp.atleast_1d(2 * jnp.arctan2(jnp.sum(turn[1:] * axis_a), turn[0]))
    gap = r_b + _rotate(turn_b, point_b) - r_a - _rotate(turn_a, point_a)
    axis = _unit(joint.axis, params, dtype, "a slider's axis")
    return jnp.atleast_1d(jnp.sum(_rotate(qconj(turn_a), gap) * axis))


class _Edge(eqx.Module):
    """A tree joint, oriented parent -> child; or a free body (joint None)."""

    joint: AbstractJoint | None
    position: int = eqx.field(static=True)  # in `joints`; -1 for a free body
    parent: int = eqx.field(static=True)  # position in the bodies; -1 the ground
    child: int = eqx.field(static=True)
    reversed: bool = eqx.field(static=True)  # the joint's b is the parent
    start: int = eqx.field(static=True)  # first of its joint coordinates
    size: int = eqx.field(static=True)


class TreeMap(eqx.Module):
    """x = A(q, params): the bodies' absolute coordinates (as `assemble` lays
    them out) from the joint coordinates, composed from the ground out.

    **Fields:** `edges` (the tree joints and free bodies, parents first),
    `bodies` (as given), `n` (joint coordinates), `quaternions` (the first
    index in q of each unit quaternion: ball joints and free spatial bodies).
    """

    edges: tuple[_Edge, ...]
    bodies: tuple[AbstractBody, ...]
    n: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    quaternions: tuple[int, ...] = eqx.field(static=True)

    def _ground(self, dtype):
        if self.dim == 2:
            return jnp.zeros((), dtype), jnp.zeros(2, dtype)
        return jnp.asarray(_IDENTITY, dtype), jnp.zeros(3, dtype)

    def poses(self, q, params: Params) -> list:
        """Per body (turn, centre): (theta, r) planar, (unit e, r) spatial."""
        dtype = q.dtype
        poses: list = [None] * len(self.bodies)
        for edge in self.edges:
            v = q[edge.start : edge.start + edge.size]
            if edge.joint is None:  # a free body: its own coordinates
                if self.dim == 2:
                    poses[edge.child] = (v[2], v[:2])
                else:
                    poses[edge.child] = (v[3:] / jnp.linalg.norm(v[3:]), v[:3])
                continue
            turn_p, r_p = self._ground(dtype) if edge.parent < 0 else poses[edge.parent]
            turn, shift = _relative(edge.joint, self.dim, v, params, dtype)
            if self.dim == 2:
                if not edge.reversed:
                    child = (turn_p + turn, r_p + rotate_2d(turn_p, shift))
                else:
                    turn_c = turn_p - turn
                    child = (turn_c, r_p - rotate_2d(turn_c, shift))
            else:
                if not edge.reversed:
                    child = (
                        qmul(turn_p, turn),
                        r_p + _rotate(turn_p, shift),
                    )
                else:
                    turn_c = qmul(turn_p, qconj(turn))
                    child = (turn_c, r_p - _rotate(turn_c, shift))
            poses[edge.child] = child
        return poses

    def __call__(self, q, params: Params) -> Array:
        """x, the bodies' coordinates in `assemble`'s layout."""
        x = [None] * len(self.bodies)
        for k, (turn, centre) in enumerate(self.poses(q, params)):
            x[k] = (
                jnp.concatenate([centre, turn[None]])
                if self.dim == 2
                else jnp.concatenate([centre, turn])
            )
        order = np.argsort([body.index for body in self.bodies])
        return jnp.concatenate([x[k] for k in order])

    def inverse(self, x, params: Params) -> Array:
        """The joint coordinates q of bodies at x (their joints assumed to
        hold): the joints' values from the bodies' relative poses."""
        dtype = x.dtype
        poses = []
        for body in self.bodies:
            c = body.coordinates(x)
            poses.append((c[2], c[:2]) if self.dim == 2 else (c[3:], c[:3]))
        q = []
        for edge in self.edges:
            if edge.joint is None:
                q.append(self.bodies[edge.child].coordinates(x))
                continue
            ends = (
                self._ground(dtype) if edge.parent < 0 else poses[edge.parent],
                poses[edge.child],
            )
            frame_a, frame_b = ends[::-1] if edge.reversed else ends
            q.append(_values(edge.joint, self.dim, frame_a, frame_b, params, dtype))
        return jnp.concatenate(q)


# -- The mechanism in joint coordinates ------------------------------------------


class _TreeLagrangian(AbstractLagrangian):
    """The bodies' Lagrangian at x = A(q), xd = J qd, plus a radial kinetic
    term c (e . edot)^2 / 2 per unit quaternion of q (A normalises it, so
    nothing moves along e: the term keeps M positive definite and changes
    neither the motion nor the energy on |e| = 1). c = 4/3 of the bodies' mean
    trace of inertia: the scale of M's other eigenvalues there, and positive
    where the body a ball turns is a point mass."""

    bodies: _Lagrangian
    map: TreeMap

    def _radial(self, t, q, qd, params):
        if not self.map.quaternions:
            return jnp.zeros((), q.dtype)
        traces = [
            jnp.trace(body.inertia_matrix(params, q.dtype)) for body in self.map.bodies
        ]
        c = 4 * sum(traces) / (3 * len(traces))
        index = np.asarray(self.map.quaternions)[:, None] + np.arange(4)
        return 0.5 * c * jnp.sum(jnp.sum(q[index] * qd[index], -1) ** 2)

    def __call__(self, t, q, qd, params):
        x, xd = jax.jvp(lambda q_: self.map(q_, params), (q,), (qd,))
        return self.bodies(t, x, xd, params) + self._radial(t, q, qd, params)

    def terms(self, t, q, qd, params):
        def place(q_):
            return self.map(q_, params)

        def rate(q_):
            return jax.jvp(place, (q_,), (qd,))[1]

        x, xd = jax.jvp(place, (q,), (qd,))
        _, bias = jax.jvp(rate, (q,), (qd,))  # Jdot qd
        jac = jax.jacfwd(place)(q)
        mass_x, force_x = self.bodies.terms(t, x, xd, params)
        mass = jac.T @ mass_x @ jac
        force = jac.T @ (force_x - mass_x @ bias)
        if self.map.quaternions:
            mass_r, force_r = lagrangian_terms(self._radial, t, q, qd, params)
            mass, force = mass + mass_r, force + force_r
        return mass, force


class _TreeConstraints(AbstractClosedFormProjection):
    """The loop-closing joints at x = A(q), then |e|^2 - 1 per quaternion of q.

    A normalises each quaternion of q, so nothing depends on its length: its
    radial direction is an eigenvector of M (the radial term alone) and
    orthogonal to the loop rows' gradients. The quaternion rows are solved
    apart (`decoupled_rows`), and without loops the mass-weighted projection
    is each quaternion normalised, its rate's radial part removed."""

    joints: Batched | None
    map: TreeMap
    loop_rows: int = eqx.field(static=True)  # -1: not known (unlabelled joints)

    def __call__(self, t, q, params):
        rows = []
        if self.joints is not None:
            x = self.map(q, params)
            loops = self.joints.rows(lambda j, x_: jnp.atleast_1d(j(t, x_, params)), x)
            if self.loop_rows >= 0 and loops.shape[0] != self.loop_rows:
                raise ValueError(
                    f"assemble_tree: the loop-closing joints give {loops.shape[0]} "
                    f"rows but name {self.loop_rows} in their `labels`; give each "
                    "joint one label per row."
                )
            rows.append(loops)
        for start in self.map.quaternions:
            rows.append(jnp.atleast_1d(jnp.sum(q[start : start + 4] ** 2) - 1))
        return jnp.concatenate(rows)

    def project(self, t, q, qd, params: Params):
        if self.joints is not None:
            return None
        for start in self.map.quaternions:
            e, ed = q[start : start + 4], qd[start : start + 4]
            norm2 = jnp.sum(e * e)
            q = q.at[start : start + 4].set(e / jnp.sqrt(norm2))
            qd = qd.at[start : start + 4].add(-jnp.sum(e * ed) / norm2 * e)
        return q, qd

    def decoupled_rows(self) -> tuple[int, ...]:
        if self.loop_rows < 0:
            return ()
        return tuple(range(self.loop_rows, self.loop_rows + len(self.map.quaternions)))


class _PulledForces(eqx.Module):
    """The loads' generalized forces on x, pulled back to q: J^T F(x, xd)."""

    forces: _Forces
    map: TreeMap

    def __call__(self, t, q, qd, params):
        x, pull = jax.vjp(lambda q_: self.map(q_, params), q)
        xd = jax.jvp(lambda q_: self.map(q_, params), (q,), (qd,))[1]
        return pull(self.forces(t, x, xd, params))[0]


class _PulledVelocityConstraints(eqx.Module):
    constraints: tuple
    map: TreeMap

    def __call__(self, t, q, qd, params):
        x, xd = jax.jvp(lambda q_: self.map(q_, params), (q,), (qd,))
        return jnp.concatenate(
            [jnp.atleast_1d(c(t, x, xd, params)) for c in self.constraints]
        )


class TreeAssembly(eqx.Module):
    """A mechanism from parts in joint coordinates: what
    [`lagrax.bodies.assemble_tree`][] returns.

    **Fields:**

    - `system`: the [`lagrax.System`][] in joint coordinates q.
    - `map`: the [`lagrax.bodies.TreeMap`][] x = A(q, params) to the bodies'
        absolute coordinates.
    - `coordinates`: a name per joint coordinate.
    - `constraint_labels`: a name per constraint row (the loop-closing joints'
        rows, then one unit-quaternion row per ball joint and free spatial body).
    - `loop_joints`: positions in `joints` of the joints that close loops.
    """

    system: System
    map: TreeMap
    coordinates: tuple[str, ...] = eqx.field(static=True)
    # The rows' names, or the part whose rows have none (a string).
    labels: tuple[str, ...] | str = eqx.field(static=True)
    loop_joints: tuple[int, ...] = eqx.field(static=True)

    @property
    def constraint_labels(self) -> tuple[str, ...]:
        """A name per constraint row, in the rows' order."""
        if isinstance(self.labels, str):
            raise TypeError(
                f"TreeAssembly.constraint_labels: {self.labels} has no `labels`; "
                "name the rows of a hand-written joint yourself."
            )
        return self.labels

    def to_bodies(self, q, qd, params: Params) -> tuple[Array, Array]:
        """The bodies' absolute (x, xd) at joint coordinates (q, qd): what
        `assemble`'s System of the same parts has."""
        return jax.jvp(lambda q_: self.map(q_, params), (q,), (qd,))

    def from_bodies(self, x, xd, params: Params) -> tuple[Array, Array]:
        """Joint coordinates (q, qd) of bodies at (x, xd), whose tree joints
        hold: the joints' values, and qd solving J qd = xd (least squares, so
        that a quaternion's rate has no part along it)."""
        x, xd = jnp.asarray(x), jnp.asarray(xd)
        q = self.map.inverse(x, params)
        gap = jnp.max(jnp.abs(self.map(q, params) - x))
        q = eqx.error_if(
            q,
            gap > 1e-6 * (1 + jnp.max(jnp.abs(x))),
            "from_bodies: the tree's joints do not give these bodies' poses: a "
            "tree joint does not hold at x, or a Hinge, Weld or SpatialPrismatic "
            "holds its bodies half a turn from the orientation its axes give "
            "(the tree measures from there). Make the joints hold first "
            "(lx.consistent_state of lb.assemble's System of the same parts).",
        )
        jac = jax.jacfwd(lambda q_: self.map(q_, params))(q)
        qd = jnp.linalg.lstsq(jac, xd)[0]
        return q, qd


_TREE_JOINTS = (Revolute, Prismatic, Fixed, Hinge, SpatialPrismatic, Weld)


def _frame_key(frame, positions, dim: int, joint):
    if isinstance(frame, Ground):
        if frame.dim != dim:
            raise TypeError(
                f"assemble_tree: {type(joint).__name__} "
                f"({getattr(joint, 'name', '')!r}) connects the "
                f"{'planar GROUND' if frame.dim == 2 else 'GROUND_3D'} to "
                f"{'spatial' if dim == 3 else 'planar'} bodies; use "
                f"{'lb.GROUND_3D' if dim == 3 else 'lb.GROUND'}."
            )
        return -1
    if isinstance(frame, AbstractBody):
        return positions.get((type(frame), frame.index))
    return None


def assemble_tree(
    bodies: Sequence[AbstractBody],
    joints: Sequence[AbstractJoint] = (),
    loads: Sequence[AbstractLoad] = (),
    *,
    gravity: Value = None,
    velocity_constraints: Sequence = (),
) -> TreeAssembly:
    """The parts of [`lagrax.bodies.assemble`][] in joint coordinates.

    The joints that reach every body from the ground, breadth first in the
    order given, form a tree; their values are the coordinates q: a planar
    `Revolute`'s relative angle theta_b - theta_a, a `Prismatic`'s or a
    `SpatialPrismatic`'s travel along its axis, a `Hinge`'s angle, a spatial
    `Revolute` (`Spherical`)'s relative quaternion (w, x, y, z); a `Fixed` or
    `Weld` adds none. A body no joint reaches keeps its own coordinates (a
    free body, and the root of the bodies joined to it). Every other joint,
    and every `Driver` or hand-written joint, closes a loop: its rows are
    evaluated on the bodies' poses and its multipliers are its forces, as in
    `assemble`. Loads and velocity constraints are the same parts too.

    Tree joints hold exactly (no rows, no drift), so an open chain has no
    constraints but its unit quaternions, and a loop mechanism only its
    loop's rows. M in q is J^T M_x J from the bodies' block-diagonal M_x.

    **Arguments:** as [`lagrax.bodies.assemble`][].

    **Returns:**

    A [`lagrax.bodies.TreeAssembly`][]: `.system` to simulate, fit and control,
    `.from_bodies` and `.to_bodies` to map the bodies' absolute coordinates (as
    `assemble` uses them) to q and back.
    """
    n_x = _check_layout(bodies)
    bodies, joints, loads = tuple(bodies), tuple(joints), tuple(loads)
    dim = bodies[0].dim
    for body in bodies:
        if not isinstance(body, PlanarBody | SpatialBody):
            raise TypeError(
                "assemble_tree: bodies must be PlanarBody or SpatialBody objects, "
                f"got {type(body).__name__}."
            )
    for load in loads:
        if not isinstance(load, AbstractLoad):
            raise TypeError(
                f"assemble_tree: loads must be Spring, Damper, Actuator, PointForce "
                f"or BodyTorque objects, got {type(load).__name__}."
            )
    planar = (Revolute, Prismatic, Fixed)
    spatial = (Revolute, Hinge, SpatialPrismatic, Weld)
    for joint in joints:
        if type(joint) in _TREE_JOINTS and type(joint) not in (
            planar if dim == 2 else spatial
        ):
            raise TypeError(
                f"assemble_tree: {type(joint).__name__} ({joint.name!r}) is a "
                f"{'spatial' if dim == 2 else 'planar'} joint, but the bodies are "
                f"{'planar' if dim == 2 else 'spatial'}."
            )
    positions = {(type(b), b.index): k for k, b in enumerate(bodies)}
    reached = [False] * len(bodies)
    in_tree = [False] * len(joints)
    edges: list[_Edge] = []
    start = 0

    def visit(queue: list) -> None:
        nonlocal start
        while queue:
            frame = queue.pop(0)
            for j, joint in enumerate(joints):
                if in_tree[j] or type(joint) not in _TREE_JOINTS:
                    continue
                a = _frame_key(joint.a, positions, dim, joint)
                b = _frame_key(joint.b, positions, dim, joint)
                if a is None or b is None:
                    continue
                if a == frame and b >= 0 and not reached[b]:
                    child, flipped = b, False
                elif b == frame and a >= 0 and not reached[a]:
                    child, flipped = a, True
                else:
                    continue
                size = _joint_size(joint, dim)
                edges.append(_Edge(joint, j, frame, child, flipped, start, size))
                start += size
                in_tree[j] = True
                reached[child] = True
                queue.append(child)

    visit([-1])
    quaternions = []
    for k, body in enumerate(bodies):
        if reached[k]:
            continue
        edges.append(_Edge(None, -1, -1, k, False, start, body.size))
        if dim == 3:
            quaternions.append(start + 3)
        start += body.size
        reached[k] = True
        visit([k])
    for edge in edges:
        if edge.joint is not None and edge.size == 4:
            quaternions.append(edge.start)
    quaternions.sort()
    tree = TreeMap(tuple(edges), bodies, start, dim, tuple(quaternions))

    absolute = _Lagrangian(Batched.of(bodies, n_x), loads or None, gravity, n_x)
    loops = [j for j in range(len(joints)) if not in_tree[j]]
    rows = bool(loops) or bool(quaternions)
    labelled = all(hasattr(joints[j], "labels") for j in loops)
    loop_rows = sum(len(joints[j].labels) for j in loops) if labelled else -1
    constraints = (
        _TreeConstraints(
            Batched.of([joints[j] for j in loops], n_x) if loops else None,
            tree,
            loop_rows,
        )
        if rows
        else None
    )
    forces = _PulledForces(_Forces(loads), tree) if loads else None
    velocity = (
        _PulledVelocityConstraints(tuple(velocity_constraints), tree)
        if velocity_constraints
        else None
    )
    system = System(
        _TreeLagrangian(absolute, tree),
        constraints,
        forces,
        velocity,
    )
    return TreeAssembly(
        system,
        tree,
        _coordinate_names(edges, joints, dim),
        _row_labels(joints, loops, edges, dim, velocity_constraints),
        tuple(loops),
    )


def _edge_names(edges, joints) -> dict[int, str]:
    """Per tree joint (by position) the name its coordinates and rows carry:
    its own, with its position where tree joints share one."""
    tree = [e.position for e in edges if e.joint is not None]
    names = {j: getattr(joints[j], "name", None) or f"joint {j}" for j in tree}
    values = list(names.values())
    return {
        j: f"{name} {j}" if values.count(name) > 1 else name
        for j, name in names.items()
    }


def _coordinate_names(edges, joints, dim) -> tuple[str, ...]:
    names = _edge_names(edges, joints)
    out = []
    for edge in edges:
        if edge.joint is None:
            own = ("x", "y", "theta") if dim == 2 else ("x", "y", "z", *_QUAT)
            out += [f"body {edge.child} {c}" for c in own]
        elif edge.size == 1:
            out.append(names[edge.position])
        elif edge.size == 4:
            out += [f"{names[edge.position]}.{c}" for c in _QUAT]
    return tuple(out)


def _row_labels(joints, loops, edges, dim, velocity_constraints):
    """The rows' names in the rows' order, or the name of a part without
    `labels` (whose row count is not known before its parameters are)."""
    labels = []
    for j in loops:
        if getattr(joints[j], "labels", None) is None:
            return f"joint {j} ({type(joints[j]).__name__})"
        labels += list(joints[j].labels)
    names = _edge_names(edges, joints)
    for edge in sorted(edges, key=lambda e: e.start):
        if edge.joint is None and dim == 3:
            labels.append(f"|e|=1 body {edge.child}")
        elif edge.joint is not None and edge.size == 4:
            labels.append(f"|e|=1 {names[edge.position]}")
    for k, c in enumerate(velocity_constraints):
        if getattr(c, "labels", None) is None:
            return f"velocity constraint {k} ({type(c).__name__})"
        labels += list(c.labels)
    return tuple(labels)
