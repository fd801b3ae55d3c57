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


def coerce_params(params, dtype=None):
    """Floats in `params` become arrays; with `dtype` (the state's), strongly typed.

    `equinox.filter_jit` treats Python floats as static, so a new value of a float
    parameter would otherwise recompile. A weakly typed float (from a Python
    float) takes the state's dtype in the equations anyway; but to jit, weak and
    strong are different types, so `{"m": 1.0}` and `{"m": jnp.asarray(1.0)}`
    would compile the same function twice: given `dtype`, they become one. Python
    ints and bools stay static: they usually select structure (a number of links,
    a mode). Any other leaf (a string, a function, an arbitrary object) is refused
    with a TypeError that names it.
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

    params = floats_as_arrays(params)
    if dtype is None:
        return params

    def strong(x):
        if (
            isinstance(x, jax.Array)
            and getattr(x, "weak_type", False)
            and jnp.issubdtype(x.dtype, jnp.floating)
        ):
            return jnp.asarray(x, dtype=dtype)
        return x

    return jax.tree.map(strong, params)


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


def all_finite(tree) -> jax.Array:
    """Whether every floating-point array in `tree` is free of NaN and inf."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if isinstance(x, jax.Array | np.ndarray | np.generic | float | complex)
        and jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _concrete(x):
    """`x` as a NumPy array if its value is known now (not traced), else None."""
    if x is None or isinstance(x, jax.core.Tracer):
        return None
    return np.asarray(x)


def check_arguments(
    where: str, *, t0, t1, ts=None, dt0=None, rtol=None, atol=None, max_steps=1
) -> None:
    """Refuse, before any work, times, tolerances and step counts that cannot be
    meant: NaN or inf, tolerances <= 0, `max_steps` < 1, `ts` not running from t0
    to t1. Values traced under jit are checked at runtime instead (result
    `invalid_arguments`, see `valid_arguments`)."""
    for name, value in (("t0", t0), ("t1", t1), ("dt0", dt0)):
        x = _concrete(value)
        if x is not None and (x.ndim != 0 or not np.isfinite(x)):
            raise ValueError(f"{where}: {name} must be a finite number, got {value}.")
    for name, value in (("rtol", rtol), ("atol", atol)):
        x = _concrete(value)
        if x is not None and not (x.ndim == 0 and np.isfinite(x) and x > 0):
            raise ValueError(
                f"{where}: {name} must be a finite number > 0, got {value}."
            )
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, int | np.integer)
        or max_steps < 1
    ):
        raise ValueError(
            f"{where}: max_steps must be an integer >= 1, got {max_steps!r} (the "
            "solve needs a bound on its steps to be compiled)."
        )
    begin, end, dt, times = _concrete(t0), _concrete(t1), _concrete(dt0), _concrete(ts)
    if begin is not None and end is not None and dt is not None:
        if dt == 0 or (end != begin and np.sign(dt) != np.sign(end - begin)):
            raise ValueError(
                f"{where}: dt0 = {dt0} must be nonzero and step from t0 = {t0} "
                f"towards t1 = {t1}."
            )
    if times is None:
        return
    if times.ndim != 1:
        raise ValueError(f"{where}: ts must be 1-D, got shape {times.shape}.")
    if not np.all(np.isfinite(times)):
        raise ValueError(f"{where}: ts must be finite, got NaN or inf in it.")
    if begin is None or end is None:
        return
    sign = -1.0 if end < begin else 1.0
    if np.any(np.diff(sign * times) < 0):
        raise ValueError(
            f"{where}: ts must run from t0 to t1 without turning back (increasing "
            "for t1 > t0); sort it."
        )
    low, high = min(begin, end), max(begin, end)
    if times.size and (times.min() < low or times.max() > high):
        raise ValueError(
            f"{where}: ts must lie within [t0, t1] = [{t0}, {t1}], got values from "
            f"{times.min()} to {times.max()}."
        )


def valid_arguments(t0, t1, ts, dt0, tolerances) -> jax.Array:
    """The checks of `check_arguments` as a traced boolean, for values traced
    under jit."""
    ok = jnp.isfinite(t0) & jnp.isfinite(t1)
    if dt0 is not None:
        ok = ok & jnp.isfinite(dt0) & (dt0 != 0)
        ok = ok & ((t1 == t0) | (jnp.sign(dt0) == jnp.sign(t1 - t0)))
    for tol in tolerances:
        ok = ok & jnp.isfinite(tol) & (tol > 0)
    if ts is not None and ts.shape[0]:
        sign = jnp.where(t1 < t0, -1, 1)
        low, high = jnp.minimum(t0, t1), jnp.maximum(t0, t1)
        ok = ok & jnp.all(jnp.isfinite(ts)) & jnp.all(jnp.diff(sign * ts) >= 0)
        ok = ok & (jnp.min(ts) >= low) & (jnp.max(ts) <= high)
    return ok
