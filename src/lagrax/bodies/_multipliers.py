"""What the multipliers of an assembled mechanism are: forces at joints, units.

The rows of [`lagrax.bodies.assemble`][]'s System are the joints' rows in order,
then one unit-quaternion row per spatial body, then the velocity constraints'
rows; lam has one entry per row, and J^T lam is the constraint force in
generalized coordinates (M qdd = f + J^T lam).
"""

from collections.abc import Sequence
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._custom_types import Params
from ._body import AbstractBody, SpatialBody
from ._joints import (
    Driver,
    Fixed,
    Hinge,
    KnifeEdge,
    Prismatic,
    Revolute,
    SpatialPrismatic,
    Weld,
)


def _attachment(part) -> tuple[AbstractBody, object] | None:
    """(body, body-fixed point) where `part`'s force is drawn, or None."""
    if isinstance(part, KnifeEdge):
        return part.body, part.point
    for body, point in (("b", "point_b"), ("a", "point_a")):
        frame = getattr(part, body, None)
        if isinstance(frame, AbstractBody) and hasattr(part, point):
            return frame, getattr(part, point)
    return None  # a Driver (a pure torque) or a hand-written joint


class JointForces(eqx.Module):
    """`forces(t, q, lam, params) -> (points, forces)`, each (k, d): the force of
    each joint on one of its bodies, and where it acts; see
    [`lagrax.bodies.joint_forces`][]."""

    bodies: tuple[AbstractBody, ...]
    joints: tuple
    velocity_constraints: tuple

    def __call__(self, t, q, lam, params: Params):
        # Row counts are shapes, known at trace time (unused values cost nothing
        # once compiled).
        rows = [jnp.atleast_1d(j(t, q, params)).shape[0] for j in self.joints]
        own = sum(1 for b in self.bodies if isinstance(b, SpatialBody))
        zero = jnp.zeros_like(q)
        rows_v = [
            jnp.atleast_1d(c(t, q, zero, params)).shape[0]
            for c in self.velocity_constraints
        ]
        if lam.shape != (sum(rows) + own + sum(rows_v),):
            raise ValueError(
                f"joint_forces: lam has shape {lam.shape}, but the joints, the "
                f"spatial bodies and the velocity constraints have {sum(rows)}, "
                f"{own} and {sum(rows_v)} rows; give the multipliers of the System "
                "that assemble built from the same parts."
            )
        # (part, its rows as a function of the argument it is linear in there,
        # that argument, the index of its first multiplier): pulled back by one
        # vjp, the rows give J^T lam (or A^T mu: psi is affine in qd).
        parts, start = [], 0
        for joint, count in zip(self.joints, rows, strict=True):
            parts.append(
                (joint, partial(_joint_rows, joint, t, params), q, start, count)
            )
            start += count
        start += own
        for constraint, count in zip(self.velocity_constraints, rows_v, strict=True):
            rows_of = partial(_velocity_rows, constraint, t, q, params)
            parts.append((constraint, rows_of, zero, start, count))
            start += count
        where, forces = [], []
        for part, rows_of, at, first, count in parts:
            attached = _attachment(part)
            if attached is None:
                continue
            _, pull = jax.vjp(rows_of, at)
            where.append(attached[0].position(q, params, attached[1]))
            forces.append(
                _translation(attached[0], pull(lam[first : first + count])[0])
            )
        if not where:
            empty = jnp.zeros((0, self.bodies[0].dim), q.dtype)
            return empty, empty
        return jnp.stack(where), jnp.stack(forces)


def _joint_rows(joint, t, params, q):
    return jnp.atleast_1d(joint(t, q, params))


def _velocity_rows(constraint, t, q, params, qd):
    return jnp.atleast_1d(constraint(t, q, qd, params))


def _translation(body: AbstractBody, generalized: Array) -> Array:
    # The body's position coordinates are its mass centre: a virtual
    # translation moves all its points alike, so this part of J^T lam is the
    # resultant force of the rows on the body.
    return generalized[body.index : body.index + body.dim]


def joint_forces(
    bodies: Sequence[AbstractBody],
    joints: Sequence = (),
    velocity_constraints: Sequence = (),
) -> JointForces:
    """The constraint forces of a mechanism's joints, for drawing.

    For each joint, the force its rows exert on its second body `b` (on `a`
    where `b` is the ground), applied at the joint's point on that body: the
    translational part of J_rows^T lam, i.e. the entries of that body's mass
    centre coordinates (a virtual translation moves every point of the body
    alike, so those entries are the resultant force of the rows on it). A pin
    exerts minus that force on the other body, at the same point. Rows that hold
    angles (a slider's or a weld's) add a torque, not a force; a `Driver` gets
    no arrow. A `KnifeEdge` pushes at its blade point, across the blade.

    **Arguments:**

    - `bodies`, `joints`, `velocity_constraints`: as given to
        [`lagrax.bodies.assemble`][].

    **Returns:**

    `forces(t, q, lam, params) -> (points, forces)`, both (k, d) with d = 2 for
    planar and 3 for spatial bodies, one row per joint with a point (in the
    order of the joints, then the velocity constraints): what a
    [`lagrax.systems.Model`][]'s `constraint_forces` returns.
    """
    return JointForces(tuple(bodies), tuple(joints), tuple(velocity_constraints))


def multiplier_units(
    bodies: Sequence[AbstractBody],
    joints: Sequence = (),
    velocity_constraints: Sequence = (),
) -> tuple[str, ...]:
    """The units of the multipliers of `assemble`'s System, in SI.

    For lengths in m, angles in rad, masses in kg and time in s: rows that hold
    positions (pins, a slider's normal, a knife edge) have forces in N, rows that
    hold angles (a slider's or weld's angle, a `Driver`) torques in N m, and a
    spatial body's unit-quaternion row an energy in J (its coordinates have no
    unit). Hand-written joints get "" (unknown), one per label.
    """
    units = []
    for joint in joints:
        if isinstance(joint, Revolute):
            units += ["N"] * joint.a.dim
        elif isinstance(joint, Prismatic):
            units += ["N", "N m"]
        elif isinstance(joint, Fixed):
            units += ["N", "N", "N m"]
        elif isinstance(joint, Driver):
            units += ["N m"]
        elif isinstance(joint, Hinge):
            units += ["N"] * 3 + ["N m"] * 2
        elif isinstance(joint, SpatialPrismatic):
            units += ["N"] * 2 + ["N m"] * 3
        elif isinstance(joint, Weld):
            units += ["N"] * 3 + ["N m"] * 3
        else:
            units += [""] * len(joint.labels)
    units += ["J" for b in bodies if isinstance(b, SpatialBody)]
    for constraint in velocity_constraints:
        if isinstance(constraint, KnifeEdge):
            units += ["N"]
        else:
            units += [""] * len(constraint.labels)
    return tuple(units)
