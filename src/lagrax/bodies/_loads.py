"""Loads in world terms, turned into generalized forces by autodiff.

A force f at a point r_P(q) does virtual work f . delta r_P = (J_r^T f) . delta q,
so its generalized force is J_r^T f, one vector-Jacobian product of the point's
position; a torque tau on a body with angular velocity omega = W(q) qd gives
W^T tau. Springs are conservative and enter the Lagrangian as a potential (so
the energy stays exact); dampers and actuators are forces.
"""

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._custom_types import Params
from ._body import AbstractBody, Ground, Value, resolve


Frame = AbstractBody | Ground


def point_force(
    position: Callable[[Array], Array], q: Float[Array, " n"], force: Array
) -> Float[Array, " n"]:
    """The generalized force J_r^T f of a force `force` at the point `position(q)`.

    **Arguments:**

    - `position`: `position(q) -> (d,)`, where the force acts (world frame).
    - `q`: the coordinates.
    - `force`: the force vector (d,), world frame.

    **Returns:**

    The generalized force (n,), by one vector-Jacobian product (no Jacobian is
    formed). Use it inside a System's `forces` function.
    """
    return _pull_back(
        position, q, force,
        lambda got, want: f"point_force: the force has shape {got} but the point "
        f"has shape {want}; give one component per coordinate of the point.",
    )  # fmt: skip


def body_torque(
    angular_velocity: Callable[[Array, Array], Array],
    q: Float[Array, " n"],
    torque: Array,
) -> Float[Array, " n"]:
    """The generalized force W^T tau of a torque on a body.

    **Arguments:**

    - `angular_velocity`: `angular_velocity(q, qd) -> omega`, linear in qd (a
        scalar in the plane, a world 3-vector in space), e.g.
        `body.angular_velocity`.
    - `q`: the coordinates.
    - `torque`: tau, of omega's shape (world frame).

    **Returns:**

    The generalized force (n,).
    """
    # omega is linear in qd: its vjp at qd = 0 is W^T.
    return _pull_back(
        lambda qd: angular_velocity(q, qd), jnp.zeros_like(q), torque,
        lambda got, want: f"body_torque: the torque has shape {got} but the "
        f"angular velocity has shape {want} (a scalar in the plane, (3,) in space).",
    )  # fmt: skip


def _pull_back(fn, at, load, mismatch) -> Array:
    # The generalized force of `load` acting on fn's output: (dfn/dat)^T load.
    value, pullback = jax.vjp(fn, at)
    load = jnp.asarray(load, at.dtype)
    if load.shape != value.shape:
        raise ValueError(mismatch(load.shape, value.shape))
    return pullback(load)[0]


class AbstractLoad(eqx.Module):
    """A load on a mechanism: a potential (conservative part) and a force."""

    @abc.abstractmethod
    def potential(self, t, q, params: Params) -> Array:
        """Its potential energy (zero if not conservative)."""

    @abc.abstractmethod
    def force(self, t, q, qd, params: Params) -> Array:
        """Its generalized non-conservative force (n,)."""


class AbstractForce(AbstractLoad):
    """A load with no potential: all of it is a generalized force."""

    def potential(self, t, q, params):
        return jnp.zeros((), q.dtype)


def _length(a: Frame, point_a, b: Frame, point_b, q, params) -> Array:
    d = b.position(q, params, point_b) - a.position(q, params, point_a)
    # Differentiable also at zero length (where the direction is undefined).
    return jnp.sqrt(jnp.sum(d**2) + jnp.finfo(q.dtype).tiny)


class Spring(AbstractLoad):
    """A linear spring between two points: V = k (l - l0)^2 / 2.

    **Arguments:**

    - `a`, `point_a`, `b`, `point_b`: the two ends (bodies or GROUND and
        body-fixed points).
    - `stiffness`: k; `rest_length`: l0 (Values: numbers, keys of params, or
        functions of params).
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    stiffness: Value
    rest_length: Value = 0.0

    def potential(self, t, q, params):
        length = _length(self.a, self.point_a, self.b, self.point_b, q, params)
        k = resolve(self.stiffness, params, q.dtype)
        return 0.5 * k * (length - resolve(self.rest_length, params, q.dtype)) ** 2

    def force(self, t, q, qd, params):
        return jnp.zeros_like(q)


class Damper(AbstractForce):
    """A linear damper between two points: tension c dl/dt along the line."""

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    damping: Value

    def force(self, t, q, qd, params):
        def length(q_):
            return _length(self.a, self.point_a, self.b, self.point_b, q_, params)

        _, rate = jax.jvp(length, (q,), (qd,))
        c = resolve(self.damping, params, q.dtype)
        return -c * rate * jax.grad(length)(q)


class Actuator(AbstractForce):
    """A linear actuator between two points pushing them apart with force u.

    `force_fn(t, q, qd, params) -> u` (negative pulls): the generalized force is
    u dl/dq.
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    force_fn: Callable[[Any, Array, Array, Params], Any]

    def force(self, t, q, qd, params):
        u = jnp.asarray(self.force_fn(t, q, qd, params), q.dtype)
        return u * jax.grad(
            lambda q_: _length(self.a, self.point_a, self.b, self.point_b, q_, params)
        )(q)


class PointForce(AbstractForce):
    """A force `force_fn(t, q, qd, params) -> f` (world frame) at a body point."""

    body: AbstractBody
    point: Value
    force_fn: Callable[[Any, Array, Array, Params], Any]

    def force(self, t, q, qd, params):
        f = self.force_fn(t, q, qd, params)
        return point_force(lambda q_: self.body.position(q_, params, self.point), q, f)


class BodyTorque(AbstractForce):
    """A torque `torque_fn(t, q, qd, params) -> tau` on a body (world frame; a
    scalar in the plane), e.g. a motor. With `reaction`, minus it acts on that
    body (a motor between two bodies)."""

    body: AbstractBody
    torque_fn: Callable[[Any, Array, Array, Params], Any]
    reaction: AbstractBody | None = None

    def force(self, t, q, qd, params):
        tau = self.torque_fn(t, q, qd, params)
        out = body_torque(self.body.angular_velocity, q, tau)
        if self.reaction is not None:
            out = out - body_torque(self.reaction.angular_velocity, q, tau)
        return out
