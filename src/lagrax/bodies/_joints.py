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
import numpy as np
from jaxtyping import Array

from .._custom_types import Params
from ._body import (
    AbstractBody,
    Ground,
    PlanarBody,
    Value,
    matvec,
    resolve,
    rotate_2d,
)


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
        return _pin(self.a, self.point_a, self.b, self.point_b, q, params)

    @property
    def labels(self):
        return tuple(f"{self.name} {c}" for c in "xyz"[: self.a.dim])


def _pin(a: Frame, point_a: Value, b: Frame, point_b: Value, q, params) -> Array:
    """r_a(point_a) - r_b(point_b): the rows of a pin (and of a hinge's pin)."""
    return a.position(q, params, point_a) - b.position(q, params, point_b)


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


def _rotation(frame: Frame, q) -> Array:
    """Body frame -> world of a spatial frame (the identity for the ground)."""
    if isinstance(frame, Ground):
        if frame.dim != 3:
            raise TypeError(
                "this joint is spatial: connect SpatialBody objects (or lagrax."
                "bodies.GROUND_3D), got the planar GROUND."
            )
        return jnp.eye(3, dtype=q.dtype)
    if not (isinstance(frame, AbstractBody) and frame.dim == 3):
        raise TypeError(
            "this joint is spatial: connect SpatialBody objects (or lagrax.bodies."
            f"GROUND_3D), got {type(frame).__name__}."
        )
    return frame.rotation(q)  # SpatialBody's, or a body moved by joints (MJCF)


def turn_rows(relative) -> Array:
    """The antisymmetric part of a relative rotation C, as three rows: zero (to
    first order) exactly where C is the identity."""
    return jnp.stack(
        [
            relative[2, 1] - relative[1, 2],
            relative[0, 2] - relative[2, 0],
            relative[1, 0] - relative[0, 1],
        ]
    )


def _unit_axis(axis: Value, params, dtype) -> Array:
    value = resolve(axis, params, dtype)
    if value.shape != (3,):
        raise ValueError(
            f"a spatial joint axis must have shape (3,), got {value.shape}."
        )
    return value / jnp.linalg.norm(value)


def _normals(axis: Value, params, dtype) -> tuple[Array, Array]:
    """Two unit vectors perpendicular to an axis and to each other (a fixed rule
    of the axis alone: for a body-fixed axis they are body-fixed too). Found in
    numpy where the axis is a constant (most are), so that tracing a mechanism
    of many hinges stays cheap."""
    constant = isinstance(axis, np.ndarray) or (
        isinstance(axis, tuple | list)
        and all(isinstance(a, int | float | np.number) for a in axis)
    )
    xp = np if constant else jnp
    if xp is jnp:
        unit = _unit_axis(axis, params, dtype)
    else:
        unit = np.asarray(axis, float)
        if unit.shape != (3,):
            raise ValueError(
                f"a spatial joint axis must have shape (3,), got {unit.shape}."
            )
        unit = unit / np.linalg.norm(unit)
    # The coordinate axis least aligned with `axis`, made perpendicular to it.
    helper = xp.eye(3)[xp.argmin(xp.abs(unit))]
    first = xp.cross(unit, helper)
    first = first / xp.linalg.norm(first)
    second = xp.cross(unit, first)
    return jnp.asarray(first, dtype), jnp.asarray(second, dtype)


class Hinge(AbstractJoint):
    """A spatial revolute joint: `b` turns relative to `a` about one axis only.

    Rows (five): r_a(point_a) - r_b(point_b) = 0, the pin (three), and the axis
    of b, `axis_b` in b's frame, perpendicular to two directions n1, n2 fixed in a
    and perpendicular to `axis_a` (two): the axes stay aligned (parallel or
    opposite; they start aligned). The multipliers are the pin force on `a` and
    the two components of the moment the hinge carries.

    **Arguments:**

    - `a`, `b`: `SpatialBody` objects or `GROUND_3D`.
    - `point_a`, `point_b`: the pin's body-fixed points (from the mass centres;
        world coordinates for the ground); `None` for the centre.
    - `axis_a`, `axis_b`: the hinge axis in each frame (any length).
    - `name`: for the row labels.
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    axis_a: Value
    axis_b: Value
    name: str = eqx.field(static=True, default="hinge")

    def __call__(self, t, q, params):
        pin = _pin(self.a, self.point_a, self.b, self.point_b, q, params)
        n1, n2 = _normals(self.axis_a, params, q.dtype)
        axis_b = matvec(_rotation(self.b, q), _unit_axis(self.axis_b, params, q.dtype))
        rotation_a = _rotation(self.a, q)
        across = [jnp.sum(matvec(rotation_a, n) * axis_b) for n in (n1, n2)]
        return jnp.concatenate([pin, jnp.stack(across)])

    @property
    def labels(self):
        return (
            *(f"{self.name} {c}" for c in "xyz"),
            f"{self.name} axis 1",
            f"{self.name} axis 2",
        )


class SpatialPrismatic(AbstractJoint):
    """A spatial slider: `b` translates relative to `a` along one axis and does not
    turn relative to it.

    Rows (five): the offset r_b(point_b) - r_a(point_a) perpendicular to two
    directions fixed in a across `axis` (two), and the relative rotation
    C = R_ref^T R_a^T R_b held at the identity by its antisymmetric part (three),
    R_ref the relative orientation to keep (the identity: frames aligned).

    **Arguments:**

    - `a`, `b`: `SpatialBody` objects or `GROUND_3D`.
    - `axis`: the sliding direction in a's frame (any length).
    - `point_a`, `point_b`: points on the line of sliding; `None` for centres.
    - `orientation`: R_ref, a (3, 3) rotation matrix (a [`lagrax.bodies.Value`][]);
        default the identity.
    """

    a: Frame
    b: Frame
    axis: Value
    point_a: Value = None
    point_b: Value = None
    orientation: Value = None
    name: str = eqx.field(static=True, default="slider")

    def __call__(self, t, q, params):
        rotation_a = _rotation(self.a, q)
        offset = self.b.position(q, params, self.point_b) - self.a.position(
            q, params, self.point_a
        )
        n1, n2 = _normals(self.axis, params, q.dtype)
        across = [jnp.sum(matvec(rotation_a, n) * offset) for n in (n1, n2)]
        relative = rotation_a.T @ _rotation(self.b, q)
        if self.orientation is not None:
            relative = resolve(self.orientation, params, q.dtype).T @ relative
        turn = turn_rows(relative)
        return jnp.concatenate([jnp.stack(across), turn])

    @property
    def labels(self):
        return (
            f"{self.name} across 1",
            f"{self.name} across 2",
            *(f"{self.name} turn {c}" for c in "xyz"),
        )


class Weld(AbstractJoint):
    """A spatial weld: `b` keeps its pose relative to `a` (MuJoCo's `equality
    weld`; [`lagrax.bodies.Fixed`][] is the planar one).

    Rows (six): r_a(point_a) - r_b(point_b) = 0, the pin at the anchor (three),
    and the relative rotation C = R_ref^T R_a^T R_b held at the identity by its
    antisymmetric part (three), R_ref the relative orientation to keep. The
    multipliers are the pin force on `a` and the three components of the moment
    the weld carries.

    **Arguments:**

    - `a`, `b`: `SpatialBody` objects or `GROUND_3D`.
    - `point_a`, `point_b`: the anchor's body-fixed points (from the mass centres;
        world coordinates for the ground); `None` for the centre.
    - `orientation`: R_ref = R_a^T R_b, the relative rotation held, a (3, 3)
        rotation matrix (a [`lagrax.bodies.Value`][]); default the identity
        (frames aligned).
    - `name`: for the row labels.
    """

    a: Frame
    point_a: Value
    b: Frame
    point_b: Value
    orientation: Value = None
    name: str = eqx.field(static=True, default="weld")

    def __call__(self, t, q, params):
        pin = _pin(self.a, self.point_a, self.b, self.point_b, q, params)
        relative = _rotation(self.a, q).T @ _rotation(self.b, q)
        if self.orientation is not None:
            relative = resolve(self.orientation, params, q.dtype).T @ relative
        return jnp.concatenate([pin, turn_rows(relative)])

    @property
    def labels(self):
        return (
            *(f"{self.name} {c}" for c in "xyz"),
            *(f"{self.name} turn {c}" for c in "xyz"),
        )


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
