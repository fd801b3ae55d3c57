"""Joints: constraint functions phi(t, q, params) built from bodies.

Each joint is a small callable Module, `joint(t, q, params) -> (rows,)`, so
joints concatenate (see [`lagrax.bodies.assemble`][]) and a System built from
them is a stable pytree (no fresh closures, no recompiles). Its `labels` name
its rows, for plots and data files.
"""

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._custom_types import Params
from ._body import AbstractBody, Ground, PlanarBody, Value, resolve, rotate_2d


Frame = AbstractBody | Ground


class AbstractJoint(eqx.Module):
    """A holonomic constraint between bodies: `joint(t, q, params) -> (rows,)`."""

    name: eqx.AbstractVar[str]

    @abc.abstractmethod
    def __call__(self, t, q, params: Params) -> Array:
        """The constraint residuals phi."""

    @property
    @abc.abstractmethod
    def labels(self) -> tuple[str, ...]:
        """One name per row."""


def _angle(frame: Frame, q) -> Array:
    if isinstance(frame, Ground):
        return jnp.zeros((), q.dtype)
    if not isinstance(frame, PlanarBody):
        raise TypeError(
            "this joint is planar: connect PlanarBody objects (or lagrax.bodies."
            f"GROUND), got {type(frame).__name__}."
        )
    return frame.angle(q)


def _turn(a: Frame, b: Frame, angle: Value, q, params) -> Array:
    # theta_b - theta_a - angle: the relative rotation a joint holds.
    return _angle(b, q) - _angle(a, q) - resolve(angle, params, q.dtype)


def _world_normal(frame: Frame, direction: Value, q, params) -> Array:
    # The unit normal of a direction fixed in `frame`, in world coordinates.
    axis = rotate_2d(_angle(frame, q), resolve(direction, params, q.dtype))
    return jnp.stack([-axis[1], axis[0]]) / jnp.linalg.norm(axis)


class Revolute(AbstractJoint):
    """A pin: point `point_a` of `a` and point `point_b` of `b` coincide.

    Rows r_a - r_b (two in the plane, three in space, where it is a ball joint).
    The multipliers are the pin force on `a` (and minus it on `b`).

    **Arguments:**

    - `a`, `b`: bodies or `GROUND`.
    - `point_a`, `point_b`: the pin's body-fixed points (body frames, from the
        mass centres; world coordinates for `GROUND`); `None` for the centre.
    - `name`: for the row labels.
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    name: str = eqx.field(static=True, default="pin")

    def __call__(self, t, q, params):
        return self.a.position(q, params, self.point_a) - self.b.position(
            q, params, self.point_b
        )

    @property
    def labels(self):
        return tuple(f"{self.name} {c}" for c in "xyz"[: self.a.dim])


Spherical = Revolute
"""A ball joint between spatial bodies: the same rows as `Revolute`, in 3-D."""


class Prismatic(AbstractJoint):
    """A slider: `b` translates along an axis fixed in `a` and does not turn.

    Rows: the offset of `point_b` from `point_a` across the axis, n_a .
    (r_b - r_a) = 0, and theta_b - theta_a - `angle` = 0.

    **Arguments:**

    - `a`, `b`: planar bodies or `GROUND`.
    - `axis`: the sliding direction in `a`'s frame (any length).
    - `point_a`, `point_b`: points on the line of sliding; `None` for centres.
    - `angle`: the fixed relative angle theta_b - theta_a.
    """

    a: Frame
    b: Frame
    axis: Value = (1.0, 0.0)
    point_a: Value = None
    point_b: Value = None
    angle: Value = 0.0
    name: str = eqx.field(static=True, default="slider")

    def __call__(self, t, q, params):
        normal = _world_normal(self.a, self.axis, q, params)
        offset = self.b.position(q, params, self.point_b) - self.a.position(
            q, params, self.point_a
        )
        turn = _turn(self.a, self.b, self.angle, q, params)
        return jnp.stack([jnp.sum(normal * offset), turn])

    @property
    def labels(self):
        return (f"{self.name} normal", f"{self.name} angle")


class Fixed(AbstractJoint):
    """A weld: `b` keeps its pose relative to `a`.

    Rows: r_b(point_b) - r_a(point_a) = 0 and theta_b - theta_a - `angle` = 0.
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value = None
    angle: Value = 0.0
    name: str = eqx.field(static=True, default="weld")

    def __call__(self, t, q, params):
        offset = self.b.position(q, params, self.point_b) - self.a.position(
            q, params, self.point_a
        )
        turn = _turn(self.a, self.b, self.angle, q, params)
        return jnp.concatenate([offset, turn[None]])

    @property
    def labels(self):
        return (f"{self.name} x", f"{self.name} y", f"{self.name} angle")


class Driver(AbstractJoint):
    """A driving constraint: theta_b - theta_a = f(t, params), a prescribed motion.

    Rheonomic: lagrax differentiates f in t (gamma contains f''), and the
    multiplier is the torque the drive must apply to `b` (minus it on `a`).

    **Arguments:**

    - `b`: the driven planar body; `a`: the reference (default `GROUND`).
    - `angle`: `angle(t, params) -> scalar`, the prescribed relative angle.
    """

    b: Frame
    angle: Callable[[Any, Params], Any]
    a: Frame = Ground(2)
    name: str = eqx.field(static=True, default="drive")

    def __call__(self, t, q, params):
        target = jnp.asarray(self.angle(t, params), q.dtype)
        return jnp.atleast_1d(_angle(self.b, q) - _angle(self.a, q) - target)

    @property
    def labels(self):
        return (self.name,)


def joint_labels(joints) -> tuple[str, ...]:
    """The row labels of several joints, in order."""
    return tuple(label for joint in joints for label in joint.labels)


class KnifeEdge(eqx.Module):
    """A velocity constraint: point `point` of a planar body cannot slide across
    the body-fixed direction `direction` (a skate, a knife edge, a sleigh's runner,
    a wheel that does not skid).

    `knife(t, q, qd, params) -> (1,)`: n . v_P = 0 with n the world normal of the
    direction, affine in qd as lagrax's velocity constraints must be. Its
    multiplier is the sideways force of the ground on the blade.
    """

    body: PlanarBody
    point: Value = None
    direction: Value = (1.0, 0.0)
    name: str = eqx.field(static=True, default="blade")

    def __call__(self, t, q, qd, params):
        normal = _world_normal(self.body, self.direction, q, params)
        velocity = jax.jvp(
            lambda q_: self.body.position(q_, params, self.point), (q,), (qd,)
        )[1]
        return jnp.atleast_1d(jnp.sum(normal * velocity))

    @property
    def labels(self):
        return (self.name,)
