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

    def __check_init__(self):
        if self.num_knots < 2:
            raise ValueError(f"{type(self).__name__}: num_knots must be >= 2.")

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
