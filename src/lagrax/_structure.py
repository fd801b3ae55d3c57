"""Structure of the mass matrix, detected at trace time.

Many models have a mass matrix that does not depend on the state and is
diagonal: point masses in Cartesian coordinates (a pendulum chain, the car axis),
bodies described by their centres of mass and angles. Their saddle system is
solved without factorizing M at all (see `SchurCholesky`), which changes the cost
of a chain of N links from O(n^3) to that of the m x m Delassus matrix.

The test has two parts, both at trace time, neither trusted alone:

1. M does not depend on (t, q, qd): read exactly from the jaxpr of M, by
   following which inputs its output is computed from. A Lagrangian with a
   branch on the state (`jnp.where(qd[0] > 0, ...)`) therefore never counts.
2. M, now a function of the parameters alone, is diagonal: evaluated at two
   random parameter values. An analytic function of the parameters that vanishes
   at two random points vanishes identically.

Anything the test cannot decide (a Lagrangian that closes over traced values,
a pjit-wrapped function, an exception or a non-finite probe) counts as dense,
which is always correct, only slower.
"""

import collections

import equinox as eqx
import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np

from ._custom_types import Params
from ._mechanics import mass_matrix  # the one definition of M
from ._system import System


_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 64


def constant_diagonal_mass(system: System, t, q, qd, params: Params) -> bool:
    """Whether M is diagonal and independent of (t, q, qd), decided at trace time."""
    dynamic, static = eqx.partition(params, eqx.is_array)
    leaves, treedef = jax.tree.flatten(dynamic)
    key = (
        system,
        treedef,
        jax.tree.structure(static),
        tuple(jax.tree.leaves(static)),
        tuple((x.shape, jnp.result_type(x)) for x in leaves),
        q.shape,
        jnp.result_type(q),
    )
    try:
        return _CACHE[key]
    except KeyError:
        pass
    except TypeError:  # something unhashable: decide without caching
        return _decide(system, t, q, qd, dynamic, static)
    value = _decide(system, t, q, qd, dynamic, static)
    _CACHE[key] = value
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def _decide(system, t, q, qd, dynamic, static) -> bool:
    def mass(t_, q_, qd_, dynamic_):
        params = eqx.combine(dynamic_, static)
        return mass_matrix(system, t_, q_, qd_, params)

    try:
        closed = jax.make_jaxpr(mass)(t, q, qd, dynamic)
    except Exception:  # noqa: BLE001 -- undecidable counts as dense
        return False
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        return False
    jaxpr = closed.jaxpr
    num_state = 3  # t, q, qd come first in the flattened inputs
    used = _used_inputs(jaxpr)
    if any(used[:num_state]):
        return False

    n = q.shape[0]
    rng = np.random.default_rng(0)
    # Two probes in one compiled call (evaluating op by op would compile every
    # primitive separately: ~10x slower at trace time). (t, q, qd) are unused.
    probes = [rng.normal(size=(2, *v.aval.shape)) for v in jaxpr.invars[:num_state]]
    probes += [_random_like(x, rng, 2) for x in jax.tree.leaves(dynamic)]
    probes = [
        np.asarray(x, v.aval.dtype) for x, v in zip(probes, jaxpr.invars, strict=True)
    ]
    try:
        evaluate = jax.jit(jax.vmap(jex.core.jaxpr_as_fun(closed)))
        (value,) = evaluate.lower(*probes).compile()(*probes)
        value = np.asarray(value)
    except Exception:  # noqa: BLE001
        return False
    if value.shape != (2, n, n) or not np.all(np.isfinite(value)):
        return False
    off_diagonal = ~np.eye(n, dtype=bool)
    diagonal = value[:, np.arange(n), np.arange(n)]
    return not np.any(value[:, off_diagonal] != 0) and bool(np.all(diagonal > 0))


def _used_inputs(jaxpr) -> list[bool]:
    """For each input of `jaxpr`, whether its outputs are computed from it.

    Walks the equations backwards from the outputs. An equation is taken whole
    (all its inputs count once any output is needed), so calls of sub-jaxprs are
    handled conservatively.
    """
    needed = {v for v in jaxpr.outvars if isinstance(v, jex.core.Var)}
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars):
            needed.update(v for v in eqn.invars if isinstance(v, jex.core.Var))
    return [v in needed for v in jaxpr.invars]


def _random_like(x, rng, count) -> np.ndarray:
    dtype = np.dtype(jnp.result_type(x))
    shape = (count, *np.shape(x))
    if np.issubdtype(dtype, np.bool_):
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1, 4, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.uniform(0.5, 2.0, size=shape) + 0j).astype(dtype)
    return rng.uniform(0.5, 2.0, size=shape).astype(dtype)
