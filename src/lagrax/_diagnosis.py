"""What went wrong, and where: the checks of a simulation's start, and the cause of
a solve that stopped before t1."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import Params
from ._initial import _consistent_state, default_tol
from ._inputs import all_finite
from ._mechanics import (
    constraint_value,
    num_constraints,
    num_velocity_constraints,
    velocity_constraint_value,
    velocity_jacobian,
    velocity_rows,
)
from ._results import RESULTS, is_failure
from ._system import System


def initial_checks(system: System, q0, qd0, params: Params, t0, project, tol):
    """(q0, qd0) projected if asked, and the result code of the checks of the start:
    finite inputs, velocity constraints affine in qd, and a consistent state (or a
    successful projection)."""
    result = RESULTS.where(
        all_finite((q0, qd0, params)), RESULTS.successful, RESULTS.nonfinite_inputs
    )
    k = num_velocity_constraints(system, t0, q0, params)
    if num_constraints(system, t0, q0, params) + k == 0:
        return q0, qd0, result
    if k:
        # psi must be affine in qd: compare it with A v + b from its linearization
        # at qd = 0, at v = qd0 + (distinct offsets: at a zero of psi or along a
        # symmetric direction a square would hide), once, where the result can
        # still say so.
        a, b = velocity_rows(system, t0, q0, params)
        probe = qd0 + jnp.linspace(0.5, 1.5, qd0.shape[0], dtype=qd0.dtype)
        psi = velocity_constraint_value(system, t0, q0, probe, params)
        linear = a @ probe + b
        scale = 1 + jnp.max(jnp.abs(psi)) + jnp.max(jnp.abs(linear))
        affine = jnp.max(jnp.abs(psi - linear)) <= (
            jnp.sqrt(jnp.finfo(q0.dtype).eps) * scale
        )
        result = RESULTS.where(
            affine | (result != RESULTS.successful),
            result,
            RESULTS.velocity_constraints_not_affine,
        )
    if project:
        free = np.ones(q0.shape, bool)
        q0, qd0, res_q, res_qd = _consistent_state(
            system, q0, qd0, params, t0, free, free, 50
        )
        tol = default_tol(q0.dtype)
        converged = (res_q <= tol) & (res_qd <= tol)
        failed = RESULTS.initial_projection_failed
    else:
        phi = constraint_value(system, t0, q0, params)
        jac, rate = velocity_jacobian(system, t0, q0, params)
        q_scale = jnp.maximum(1, jnp.max(jnp.abs(q0)))
        qd_scale = jnp.maximum(1, jnp.max(jnp.abs(qd0)))
        converged = (jnp.max(jnp.abs(phi), initial=0) <= tol * q_scale**2) & (
            jnp.max(jnp.abs(jac @ qd0 + rate), initial=0) <= tol * q_scale * qd_scale
        )
        failed = RESULTS.inconsistent_initial_state
    result = RESULTS.where(converged | (result != RESULTS.successful), result, failed)
    return q0, qd0, result


# Where a solve stopped before t1, the saddle system is also solved at the last
# state reached and at states a little further along its velocity, (t + h, q +
# h qd), h = PROBES times the length of the run: where the step size collapsed,
# the failure lies just beyond that state, and these name it. After max_steps only
# the near ones count: the solve may have stopped anywhere.
PROBES = (0.0, 1e-13, 1e-11, 1e-9, 1e-7, 1e-5, 1e-3, 1e-2)
_NEAR = 5  # PROBES[:_NEAR] are within 1e-9 of the run
# The constraint rows, each scaled to unit length, count as dependent when their
# smallest singular value is below this fraction of the largest (eps^(1/4) in
# float64: rows closer to dependence than this make the multipliers meaningless).
_SINGULAR = 1e-4


def probe_states(final, span, result):
    """The states (ts, q, qd) at which the saddle system is probed beyond `final` =
    (t, q, qd): (t + h, q + h qd, qd) for h = PROBES times `span`, the length of
    the run, where the integrator's `result` says it got stuck; else all at
    `final` (h = 0), where the model is finite since the solve got there.

    Probes beyond a run that succeeded would say nothing, and might land where
    the model is NaN (a run that ends near a singularity): the gradient of that
    run would then be NaN (zero cotangent times NaN derivative).
    """
    t, q, qd = final
    h = jnp.where(is_stuck(result), span, 0) * jnp.asarray(PROBES, q.dtype)
    return t + h, q + h[:, None] * qd, jnp.broadcast_to(qd, (h.shape[0], *qd.shape))


def is_stuck(result):
    """Whether the integrator's `result` says it got stuck before t1."""
    return (
        (result == RESULTS.step_size_collapsed)
        | (result == RESULTS.nonfinite_step)
        | (result == RESULTS.max_steps)
    )


def _no_gradient(tree):
    return jax.tree.map(
        lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x, tree
    )


def diagnose(system: System, params: Params, result, probed, final, start):
    """The cause of a solve that stopped at the state `final` = (t, q, qd).

    `result` is the code the solve ended with; `probed`, the saddle solve's
    results at `probe_states`; `start` = (t0, q0). A solve that got stuck (step
    size collapsed, a non-finite fixed step, max_steps) is explained by, in order:
    a failure of the saddle system at the final state; constraint rows that became
    dependent there (a singular configuration); the first failure just beyond it.
    Rows that were independent at the start and lost rank on the way are a
    singular configuration, not redundant constraints.
    """
    t, q, _ = final
    collapsed = (result == RESULTS.step_size_collapsed) | (
        result == RESULTS.nonfinite_step
    )
    stuck = is_stuck(result)
    near = np.arange(len(PROBES)) < _NEAR
    failed = is_failure(probed) & (collapsed | near)
    first = jax.tree.map(lambda v: v[jnp.argmax(failed)], probed)
    at_final = jax.tree.map(lambda v: v[0], probed)
    cause = RESULTS.where(jnp.any(failed), first, result)
    cause = RESULTS.where(
        _rank_lost(system, t, q, params), RESULTS.singular_configuration, cause
    )
    cause = RESULTS.where(is_failure(at_final), at_final, cause)
    result = RESULTS.where(stuck, cause, result)
    rank = (result == RESULTS.redundant_constraints) | (
        result == RESULTS.singular_saddle_matrix
    )
    independent_at_start = ~_rank_lost(system, *start, params)
    return RESULTS.where(
        rank & independent_at_start, RESULTS.singular_configuration, result
    )


def _rank_lost(system, t, q, params):
    (t, q, params) = _no_gradient((t, q, params))
    if (
        num_constraints(system, t, q, params)
        + num_velocity_constraints(system, t, q, params)
        < 2
    ):
        return jnp.asarray(False)
    rows, _ = velocity_jacobian(system, t, q, params)
    norms = jnp.linalg.norm(rows, axis=1, keepdims=True)
    sigma = jnp.linalg.svd(rows / jnp.where(norms > 0, norms, 1), compute_uv=False)
    return sigma[-1] < _SINGULAR * sigma[0]
