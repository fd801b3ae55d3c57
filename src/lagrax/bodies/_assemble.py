"""`assemble`: a System from bodies, joints, loads and gravity."""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._mechanics import AbstractLagrangian
from .._system import System
from ._batching import Batched
from ._body import AbstractBody, SpatialBody, Value
from ._joints import AbstractJoint
from ._kinematic_tree import one_hot
from ._loads import AbstractLoad


def _check_layout(bodies: Sequence[AbstractBody]) -> int:
    if not bodies:
        raise ValueError("assemble: give at least one body.")
    for body in bodies:
        if not isinstance(body, AbstractBody):
            raise TypeError(
                "assemble: `bodies` must be PlanarBody or SpatialBody objects, got "
                f"{type(body).__name__}."
            )
    dims = {body.dim for body in bodies}
    if len(dims) > 1:
        raise ValueError("assemble: mix of planar and spatial bodies; use one kind.")
    spans = sorted((body.index, body.index + body.size) for body in bodies)
    end = 0
    for start, stop in spans:
        if start != end:
            raise ValueError(
                f"assemble: the bodies' coordinates must tile q without gaps or "
                f"overlaps, but a body starts at index {start} where {end} was "
                f"expected. Give body k the index {bodies[0].size} * k."
            )
        end = stop
    return end


class _Lagrangian(AbstractLagrangian):
    """The bodies' T - V, minus the loads' potentials. M is block diagonal:
    each body's block comes from its own energy on its own coordinates (one
    vmapped Hessian per kind of body), not from a Hessian of the whole sum over
    all n coordinates, which would cost n passes over every body."""

    bodies: Batched
    # None, not (), when there are none: equinox's tree_at (which diffrax's
    # BacksolveAdjoint applies to the solver state, holding the terms) fails on
    # an empty tuple inside the subtree it replaces.
    loads: tuple[AbstractLoad, ...] | None
    gravity: Value
    n: int = eqx.field(static=True)

    def _check(self, q):
        if q.shape != (self.n,):
            raise ValueError(
                f"assemble: the bodies own {self.n} coordinates, but q has shape "
                f"{q.shape}."
            )

    def _energy(self, params):
        def energy(body, q_, qd_):
            lagrangian = body.kinetic_energy(q_, qd_, params)
            if self.gravity is not None:
                lagrangian -= body.potential_energy(q_, params, self.gravity)
            return lagrangian

        return energy

    def _potential(self, t, q, params):
        return sum(load.potential(t, q, params) for load in self.loads or ())

    def __call__(self, t, q, qd, params):
        self._check(q)
        potential = self._potential(t, q, params)
        return self.bodies.total(self._energy(params), q, qd) - potential

    def terms(self, t, q, qd, params):
        self._check(q)
        energy = self._energy(params)

        def body_terms(body, q_, qd_):
            # A body's energy does not depend on time: f = dL/dq - (dp/dq) qd.
            momentum = jax.grad(lambda a, b: energy(body, a, b), argnums=1)
            mass = jax.jacfwd(momentum, argnums=1)(q_, qd_)
            _, mixed = jax.jvp(lambda a: momentum(a, qd_), (q_,), (qd_,))
            return mass, jax.grad(energy, argnums=1)(body, q_, qd_) - mixed

        mass = jnp.zeros((self.n, self.n), q.dtype)
        force = jnp.zeros(self.n, q.dtype)
        for indices, (blocks, forces) in self.bodies.blocks(body_terms, q, qd):
            mass = mass + _block_diagonal(blocks, indices, self.n)
            force = force + _spread(forces, indices, self.n)
        if self.loads:
            force = force - jax.grad(self._potential, argnums=1)(t, q, params)
        return mass, force

    def mass(self, t, q, qd, params):
        # M alone, for the projections: by autodiff of the whole, which measured
        # faster there than the blocks (Bricard's linkage: 1.25x per step with
        # the blocks, an augmented-Lagrangian projection at every step).
        return jax.jacfwd(jax.grad(self, argnums=2), argnums=2)(t, q, qd, params)


def _contiguous(indices: np.ndarray) -> bool:
    flat = indices.reshape(-1)
    return bool(np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)))


def _block_diagonal(blocks, indices: np.ndarray, n: int):
    """The (n, n) matrix with blocks (k, L, L) on the rows and columns
    `indices` (k, L): padded where the members' coordinates follow each other,
    placed by one-hot products otherwise (no scatter, see `one_hot`)."""
    k, size = indices.shape
    eye = jnp.eye(k, dtype=blocks.dtype)
    diagonal = (blocks[:, :, None, :] * eye[:, None, :, None]).reshape(
        k * size, k * size
    )
    if _contiguous(indices):
        start = int(indices[0, 0])
        after = n - start - k * size
        return jnp.pad(diagonal, ((start, after), (start, after)))
    at = one_hot(indices.reshape(-1), n, blocks.dtype)
    return at.T @ diagonal @ at


def _spread(values, indices: np.ndarray, n: int):
    """The vector (n,) with values (k, L) at `indices` (k, L)."""
    flat = values.reshape(-1)
    if _contiguous(indices):
        start = int(indices[0, 0])
        return jnp.pad(flat, (start, n - start - flat.size))
    return flat @ one_hot(indices.reshape(-1), n, values.dtype)


class _Constraints(eqx.Module):
    joints: Batched
    bodies: Batched

    def __call__(self, t, q, params):
        joints = self.joints.rows(lambda j, q_: jnp.atleast_1d(j(t, q_, params)), q)
        own = self.bodies.rows(lambda b, q_: b.own_constraints(q_), q)
        return jnp.concatenate([joints, own])


class _Forces(eqx.Module):
    loads: tuple[AbstractLoad, ...]

    def __call__(self, t, q, qd, params):
        return sum(load.force(t, q, qd, params) for load in self.loads)


class _VelocityConstraints(eqx.Module):
    constraints: Batched

    def __call__(self, t, q, qd, params):
        return self.constraints.rows(
            lambda c, q_, qd_: jnp.atleast_1d(c(t, q_, qd_, params)), q, qd
        )


def assemble(
    bodies: Sequence[AbstractBody],
    joints: Sequence[AbstractJoint] = (),
    loads: Sequence[AbstractLoad] = (),
    *,
    gravity: Value = None,
    velocity_constraints: Sequence = (),
) -> System:
    """A [`lagrax.System`][] of rigid bodies connected by joints.

    L = sum of the bodies' kinetic energies - gravity potential - the loads'
    potentials (springs); constraints = the joints' rows in order, then one unit
    quaternion row per spatial body; forces = the sum of the loads' forces.

    **Arguments:**

    - `bodies`: `PlanarBody`s or `SpatialBody`s whose coordinate slices tile q.
    - `joints`: holonomic joints (`Revolute`, `Prismatic`, `Fixed`, `Driver`,
        `Spherical`, or any `joint(t, q, params) -> (rows,)`).
    - `loads`: `Spring`, `Damper`, `Actuator`, `PointForce`, `BodyTorque`.
    - `gravity`: the gravity vector (a Value, e.g. `(0.0, -9.81)` or
        `lambda p: jnp.array([0.0, -p["g"]])`); `None` for none.
    - `velocity_constraints`: nonholonomic ones, e.g. `KnifeEdge` (any
        `c(t, q, qd, params) -> (rows,)` affine in qd).

    **Returns:**

    A System; the constraint rows are named by
    [`lagrax.bodies.constraint_labels`][].
    """
    n = _check_layout(bodies)
    bodies, joints, loads = tuple(bodies), tuple(joints), tuple(loads)
    for load in loads:
        if not isinstance(load, AbstractLoad):
            raise TypeError(
                f"assemble: loads must be Spring, Damper, Actuator, PointForce or "
                f"BodyTorque objects, got {type(load).__name__}. Give other forces "
                "to lagrax.System(forces=...) directly."
            )
    has_rows = bool(joints) or any(isinstance(b, SpatialBody) for b in bodies)
    batched = Batched.of(bodies, n)
    return System(
        _Lagrangian(batched, loads or None, gravity, n),
        _Constraints(Batched.of(joints, n), batched) if has_rows else None,
        _Forces(loads) if loads else None,
        _VelocityConstraints(Batched.of(velocity_constraints, n))
        if velocity_constraints
        else None,
    )


def constraint_labels(
    bodies: Sequence[AbstractBody],
    joints: Sequence[AbstractJoint] = (),
    velocity_constraints: Sequence = (),
) -> tuple[str, ...]:
    """Names of the constraint rows (and multipliers) of `assemble`'s System."""

    def of(part):
        labels = getattr(part, "labels", None)
        if labels is None:
            raise TypeError(
                f"constraint_labels: {type(part).__name__} has no `labels`; name the "
                "rows of a hand-written joint yourself."
            )
        return list(labels)

    labels = [label for joint in joints for label in of(joint)]
    labels += [
        f"|e|=1 body {k}" for k, b in enumerate(bodies) if isinstance(b, SpatialBody)
    ]
    labels += [label for c in velocity_constraints for label in of(c)]
    return tuple(labels)
