"""Controls: time-dependent inputs whose values live in `params`.

A control is a function of time parametrized by values at knots; the values are
part of `params`, so `jax.grad` of anything simulated gives their gradient, and
optax can optimize them. Use one inside the `forces` of a system:

    control = lx.CubicSpline(0.0, 3.0, num_knots=31)

    def forces(t, q, qd, p):
        u = lx.saturate(control(t, p["u"]), p["u_max"])
        return jnp.stack([u, 0.0, 0.0])
"""

import abc
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


class AbstractControl(eqx.Module):
    """u(t) from values at `num_knots` equally spaced knots on [t0, t1].

    `control(t, values)` with `values` of shape (num_knots,) or
    (num_knots, k) for k inputs; constant beyond the ends.
    """

    t0: float
    t1: float
    num_knots: int = eqx.field(static=True)

    _min_knots: ClassVar[int] = 2

    def __check_init__(self):
        if self.num_knots < self._min_knots:
            raise ValueError(
                f"{type(self).__name__}: num_knots must be >= {self._min_knots}."
            )

    @property
    def knots(self) -> Float[Array, " num_knots"]:
        """The knot times."""
        return jnp.linspace(self.t0, self.t1, self.num_knots)

    def zeros(self, *shape: int) -> Float[Array, "num_knots ..."]:
        """Values for a zero control (of `shape` inputs)."""
        return jnp.zeros((self.num_knots, *shape))

    def __call__(self, t, values: Float[ArrayLike, "num_knots ..."]) -> Array:
        values = jnp.asarray(values)
        if values.shape[0] != self.num_knots:
            raise ValueError(
                f"{type(self).__name__}: expected {self.num_knots} values (one per "
                f"knot) along the first axis, got shape {values.shape}."
            )
        t = jnp.clip(t, self.t0, self.t1)
        knots = self.knots.astype(values.dtype)
        return self._evaluate(knots, jnp.asarray(t, values.dtype), values)

    @abc.abstractmethod
    def _evaluate(self, knots, t, values) -> Array: ...


class PiecewiseLinear(AbstractControl):
    """Linear between the knots. The simplest control. Its kinks need steps that
    end at the knots: pass `step_ts=control.knots` to [`lagrax.simulate`][], or
    the accuracy there (and of gradients) is lost."""

    def _evaluate(self, knots, t, values):
        flat = values.reshape(self.num_knots, -1)
        out = jax.vmap(lambda v: jnp.interp(t, knots, v), in_axes=1)(flat)
        return out.reshape(values.shape[1:])


class PiecewiseConstant(AbstractControl):
    """A zero-order hold: [t0, t1] cut into `num_knots` equal intervals, the
    value i held on the i-th, [t0 + i h, t0 + (i + 1) h) with h = (t1 - t0) /
    num_knots (the last one also at t1 and beyond). `knots` are the starts of the
    intervals. The control of direct multiple shooting, one value per interval
    (as CasADi's Opti examples write it). Simulate it with
    `jump_ts=control.boundaries`, so that no step straddles a jump."""

    _min_knots: ClassVar[int] = 1

    @property
    def knots(self) -> Float[Array, " num_knots"]:
        """The start of each interval."""
        return self.boundaries[:-1]

    @property
    def boundaries(self) -> Float[Array, " num_knots+1"]:
        """The num_knots + 1 interval boundaries, t0 to t1."""
        return jnp.linspace(self.t0, self.t1, self.num_knots + 1)

    def _evaluate(self, knots, t, values):
        # Against the boundaries themselves (not floor((t - t0) / h), which
        # rounds either way near them): a step that ends just before a boundary
        # (diffrax's jump_ts) sees the value before it, one that starts there the
        # value after it.
        edges = self.boundaries.astype(t.dtype)
        i = jnp.searchsorted(edges, t, side="right") - 1
        return values[jnp.clip(i, 0, self.num_knots - 1)]


class CubicSpline(AbstractControl):
    """A smooth (C1) cubic Hermite spline through the values at the knots, from
    diffrax's `backward_hermite_coefficients` and `CubicInterpolation`."""

    def _evaluate(self, knots, t, values):
        coeffs = dfx.backward_hermite_coefficients(knots, values)
        return dfx.CubicInterpolation(knots, coeffs).evaluate(t)


def saturate(u: ArrayLike, limit: ArrayLike) -> Array:
    """limit * tanh(u / limit): a smooth bound |u| < limit, ~u for small u.

    Optimize the unbounded values and pass them through this to respect an
    actuator limit without constraints in the optimizer.
    """
    return limit * jnp.tanh(jnp.asarray(u) / limit)
