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


_NUMERIC = (jax.Array, np.ndarray, np.generic, bool, int, float, complex)


def coerce_params(params):
    """Floats in `params` become (weakly typed) arrays.

    `equinox.filter_jit` treats Python floats as static, so a new value of a float
    parameter would otherwise recompile. Python ints and bools stay static: they
    usually select structure (a number of links, a mode). Any other leaf (a
    string, a function, an arbitrary object) is refused with a TypeError that
    names it.
    """

    for path, x in jax.tree_util.tree_flatten_with_path(params)[0]:
        if not isinstance(x, _NUMERIC):
            where = "params" + jax.tree_util.keystr(path)
            raise TypeError(
                f"{where} is a {type(x).__name__} ({x!r:.40}); params must be a "
                "pytree (dict, list, tuple, NamedTuple, equinox.Module) of arrays "
                "and numbers. Keep other settings out of params: close over them "
                "in the Lagrangian, or mark them static in an equinox.Module "
                "(eqx.field(static=True))."
            )

    return floats_as_arrays(params)


def floats_as_arrays(tree):
    """Python floats and NumPy floating arrays in `tree` as JAX arrays; the rest
    as it is."""

    def leaf(x):
        if isinstance(x, float) or (
            isinstance(x, np.ndarray | np.floating)
            and np.issubdtype(np.asarray(x).dtype, np.inexact)
        ):
            return jnp.asarray(x)
        return x

    return jax.tree.map(leaf, tree)
