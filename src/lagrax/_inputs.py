"""Normalizing user inputs before they reach a compiled function."""

import jax
import jax.numpy as jnp
import numpy as np


def coerce_state(q, qd):
    """(q, qd) as 1-D float arrays of the same shape and dtype."""
    q = jnp.asarray(q)
    qd = jnp.asarray(qd)
    if q.ndim != 1 or qd.ndim != 1 or q.shape != qd.shape:
        raise ValueError(
            "q and qd must be 1-D arrays of the same length n, got shapes "
            f"{q.shape} and {qd.shape}."
        )
    dtype = jnp.result_type(q, qd, float)
    return q.astype(dtype), qd.astype(dtype)


def coerce_params(params):
    """Floats in `params` become (weakly typed) arrays.

    `equinox.filter_jit` treats Python floats as static, so a new value of a float
    parameter would otherwise recompile. Python ints, strings and other non-array
    leaves stay static: they usually select structure (a number of links, a mode).
    """

    def leaf(x):
        if isinstance(x, float) or (
            isinstance(x, np.ndarray | np.floating)
            and np.issubdtype(np.asarray(x).dtype, np.inexact)
        ):
            return jnp.asarray(x)
        return x

    return jax.tree.map(leaf, params)
