"""Rigid bodies: where their points are, how fast they move, their energies.

A body owns a contiguous slice of the coordinates q: three for a planar body,
(x, y, theta) of its mass centre and its angle; seven for a spatial body, the
mass centre r and a unit quaternion e = (w, x, y, z) (kept unit by a constraint
that [`lagrax.bodies.assemble`][] adds). Mass, inertia and body-fixed points are
*values*: a number or array (a constant), a string (the key of a parameter in
`params`, so it can be fitted) or a function `params -> value`.
"""

import abc
from collections.abc import Callable
from typing import Any, TypeAlias

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._custom_types import Params


Value: TypeAlias = float | str | Callable[[Params], Any] | Any
"""A number or array, the key of a parameter, or a function `params -> value`."""


def resolve(value: Value, params: Params, dtype) -> Array:
    """The array a [`lagrax.bodies.Value`][] stands for under `params`."""
    if isinstance(value, str):
        try:
            value = params[value]
        except (KeyError, TypeError, IndexError):
            raise KeyError(
                f"lagrax.bodies: the parameter {value!r} is not in params; add it "
                "(e.g. params = {..., " + repr(value) + ": 1.0}) or give a number."
            ) from None
    elif callable(value):
        value = value(params)
    return jnp.asarray(value, dtype=dtype)


class AbstractBody(eqx.Module):
    """A rigid body whose pose is `size` coordinates of q from `index` on."""

    index: eqx.AbstractVar[int]
    mass: eqx.AbstractVar[Value]
    inertia: eqx.AbstractVar[Value]

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """How many coordinates the body owns."""

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """2 (planar) or 3 (spatial)."""

    @abc.abstractmethod
    def position(self, q, params: Params, local: Value = None) -> Array:
        """World position of a body-fixed point (`local`, body frame, from the
        mass centre; the mass centre itself if `None`)."""

    @abc.abstractmethod
    def angular_velocity(self, q, qd) -> Array:
        """World angular velocity: a scalar (planar) or a 3-vector (spatial)."""

    @abc.abstractmethod
    def kinetic_energy(self, q, qd, params: Params) -> Array:
        """T = m |v|^2 / 2 + (rotational part)."""

    @abc.abstractmethod
    def own_constraints(self, q) -> Array:
        """Constraints the coordinates need (the unit quaternion), shape (c,)."""

    def coordinates(self, q) -> Array:
        """The body's slice of q."""
        return q[self.index : self.index + self.size]

    def velocity(self, q, qd, params: Params, local: Value = None) -> Array:
        """World velocity of a body-fixed point: d/dt position, by one jvp."""
        return jax.jvp(lambda q_: self.position(q_, params, local), (q,), (qd,))[1]

    def potential_energy(self, q, params: Params, gravity: Value) -> Array:
        """V = -m g . r of the mass centre in the field `gravity` (a vector)."""
        g = resolve(gravity, params, q.dtype)
        m = resolve(self.mass, params, q.dtype)
        return -m * jnp.sum(g * self.position(q, params))


def _local(local: Value, params: Params, dtype, dim: int) -> Array:
    if local is None:
        return jnp.zeros(dim, dtype)
    value = resolve(local, params, dtype)
    if value.shape != (dim,):
        raise ValueError(
            f"lagrax.bodies: a body-fixed point must have shape ({dim},), got "
            f"{value.shape}."
        )
    return value


def rotation_2d(theta) -> Float[Array, "2 2"]:
    """The rotation matrix of angle theta."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])


def rotate_2d(theta, r) -> Float[Array, " 2"]:
    """R(theta) r, written out: no 2 x 2 matrix product, which vmapped over many
    bodies and tangents becomes a batched dot that CPUs run slowly."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.stack([c * r[0] - s * r[1], s * r[0] + c * r[1]])


def matvec(matrix, vector) -> Array:
    """matrix @ vector as a product and a sum (see `rotate_2d`)."""
    return jnp.sum(matrix * vector, axis=-1)


class PlanarBody(AbstractBody):
    """A rigid body in the plane: q[index : index + 3] = (x, y, theta).

    (x, y) is the mass centre, theta the angle of the body frame.
    T = m (xd^2 + yd^2) / 2 + I thetad^2 / 2.

    **Arguments:**

    - `index`: the first of the body's three coordinates in q.
    - `mass`: m, a [`lagrax.bodies.Value`][].
    - `inertia`: I about the mass centre (a scalar Value).
    """

    index: int = eqx.field(static=True)
    mass: Value
    inertia: Value

    @property
    def size(self) -> int:
        return 3

    @property
    def dim(self) -> int:
        return 2

    def angle(self, q) -> Array:
        """theta."""
        return q[self.index + 2]

    def position(self, q, params: Params, local: Value = None) -> Array:
        x, y, theta = self.coordinates(q)
        r = _local(local, params, q.dtype, 2)
        return jnp.stack([x, y]) + rotate_2d(theta, r)

    def angular_velocity(self, q, qd) -> Array:
        return qd[self.index + 2]

    def kinetic_energy(self, q, qd, params: Params) -> Array:
        v = self.coordinates(qd)
        m = resolve(self.mass, params, q.dtype)
        inertia = resolve(self.inertia, params, q.dtype)
        return 0.5 * m * (v[0] ** 2 + v[1] ** 2) + 0.5 * inertia * v[2] ** 2

    def own_constraints(self, q) -> Array:
        return jnp.zeros((0,), q.dtype)


def quaternion_rotation(e) -> Float[Array, "3 3"]:
    """R(e) = (w^2 - v.v) I + 2 v v^T + 2 w [v]x: the rotation of a unit e =
    (w, v), scaled by |e|^2 off the unit sphere (smooth everywhere)."""
    w, v = e[0], e[1:]
    return (
        (w**2 - jnp.sum(v**2)) * jnp.eye(3, dtype=e.dtype)
        + 2 * jnp.outer(v, v)
        + 2 * w * (_skew(v))
    )


def _skew(v) -> Array:
    zero = jnp.zeros((), v.dtype)
    return jnp.stack(
        [
            jnp.stack([zero, -v[2], v[1]]),
            jnp.stack([v[2], zero, -v[0]]),
            jnp.stack([-v[1], v[0], zero]),
        ]
    )


def _body_rate_matrix(e) -> Float[Array, "3 4"]:
    # omega_body = 2 G(e) edot, with G e = 0.
    w, x, y, z = e
    return jnp.stack(
        [
            jnp.stack([-x, w, z, -y]),
            jnp.stack([-y, -z, w, x]),
            jnp.stack([-z, y, -x, w]),
        ]
    )


class SpatialBody(AbstractBody):
    """A rigid body in space: q[index : index + 7] = (x, y, z, w, e1, e2, e3).

    (x, y, z) is the mass centre, (w, e1, e2, e3) a unit quaternion (Euler
    parameters) of the body frame: no singular orientation, at the price of one
    constraint |e|^2 = 1 per body, which `assemble` adds. With the body angular
    velocity omega = 2 G(e) edot (Nikravesh, *Computer-Aided Analysis of
    Mechanical Systems*, 1988, ch. 6),

        T = m |rdot|^2 / 2 + omega^T I omega / 2 + c (e . edot)^2 / 2,

    where the last term (c = 4 tr(I) / 3) vanishes on every motion that keeps
    |e| = 1 (e . edot = 0 there) and changes neither the motion nor the energy; it
    makes the mass matrix positive definite (omega does not see edot along e), so
    the fast Schur-complement solve applies.

    **Arguments:**

    - `index`: the first of the body's seven coordinates in q.
    - `mass`: m, a [`lagrax.bodies.Value`][].
    - `inertia`: the inertia about the mass centre in the body frame: principal
        moments (3,) or a symmetric (3, 3) matrix.
    """

    index: int = eqx.field(static=True)
    mass: Value
    inertia: Value

    @property
    def size(self) -> int:
        return 7

    @property
    def dim(self) -> int:
        return 3

    def quaternion(self, q) -> Array:
        """e = (w, e1, e2, e3)."""
        return q[self.index + 3 : self.index + 7]

    def rotation(self, q) -> Array:
        """The rotation matrix body frame -> world."""
        return quaternion_rotation(self.quaternion(q))

    def position(self, q, params: Params, local: Value = None) -> Array:
        r = _local(local, params, q.dtype, 3)
        return q[self.index : self.index + 3] + matvec(self.rotation(q), r)

    def body_angular_velocity(self, q, qd) -> Array:
        """omega in the body frame, 2 G(e) edot."""
        return 2 * matvec(_body_rate_matrix(self.quaternion(q)), self.quaternion(qd))

    def angular_velocity(self, q, qd) -> Array:
        return matvec(self.rotation(q), self.body_angular_velocity(q, qd))

    def inertia_matrix(self, params: Params, dtype) -> Array:
        """I in the body frame, (3, 3)."""
        inertia = resolve(self.inertia, params, dtype)
        if inertia.shape == (3,):
            return jnp.diag(inertia)
        if inertia.shape != (3, 3):
            raise ValueError(
                "SpatialBody: inertia must be principal moments (3,) or a (3, 3) "
                f"matrix, got shape {inertia.shape}."
            )
        return inertia

    def kinetic_energy(self, q, qd, params: Params) -> Array:
        m = resolve(self.mass, params, q.dtype)
        inertia = self.inertia_matrix(params, q.dtype)
        rd = qd[self.index : self.index + 3]
        omega = self.body_angular_velocity(q, qd)
        e, ed = self.quaternion(q), self.quaternion(qd)
        c = 4 * jnp.trace(inertia) / 3
        spin = jnp.sum(omega * matvec(inertia, omega))
        return 0.5 * (m * jnp.sum(rd**2) + spin + c * jnp.sum(e * ed) ** 2)

    def own_constraints(self, q) -> Array:
        e = self.quaternion(q)
        return jnp.atleast_1d(jnp.sum(e**2) - 1)


class Ground(eqx.Module):
    """The fixed frame: its points are where they are given, and never move."""

    dim: int = eqx.field(static=True, default=2)

    def position(self, q, params: Params, local: Value = None) -> Array:
        return _local(local, params, q.dtype, self.dim)

    def angle(self, q) -> Array:
        return jnp.zeros((), q.dtype)


GROUND = Ground(2)
"""The fixed frame of a planar mechanism."""
GROUND_3D = Ground(3)
"""The fixed frame of a spatial mechanism."""
