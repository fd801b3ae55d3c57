"""`consistent_state`: initial (q, qd) that satisfy the constraints."""

import functools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lnx
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ._custom_types import Params, RealScalarLike
from ._errors import failures_are_nan
from ._inputs import coerce_params, coerce_state
from ._mechanics import (
    constraint_jacobian,
    constraint_value,
    num_constraints,
    velocity_jacobian,
)
from ._system import System


_STEPS = 2.0 ** -np.arange(8)  # backtracking line search: 1, 1/2, ..., 1/128


def _free_mask(name: str, fixed, n: int) -> np.ndarray:
    """Boolean mask of the coordinates consistent_state may change."""
    free = np.ones(n, dtype=bool)
    if fixed is None:
        return free
    fixed = np.asarray(fixed)
    if fixed.dtype == bool:
        if fixed.shape != (n,):
            raise ValueError(
                f"consistent_state: boolean {name} must have shape ({n},), got "
                f"{fixed.shape}."
            )
        return ~fixed
    if fixed.ndim > 1 or not np.issubdtype(fixed.dtype, np.integer):
        raise ValueError(
            f"consistent_state: {name} must be indices of coordinates or a boolean "
            f"mask of length {n}, got {fixed!r}."
        )
    fixed = fixed.reshape(-1)
    if np.any((fixed < -n) | (fixed >= n)):
        raise ValueError(
            f"consistent_state: {name} = {fixed.tolist()} has an index out of range "
            f"for {n} coordinates."
        )
    free[fixed] = False
    return free


def consistent_state(
    system: System,
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    params: Params,
    t: RealScalarLike = 0.0,
    fixed_q: Sequence[int] | Int[ArrayLike, " k"] | Bool[ArrayLike, " n"] | None = None,
    fixed_qd: Sequence[int]
    | Int[ArrayLike, " k"]
    | Bool[ArrayLike, " n"]
    | None = None,
    *,
    tol: float | None = None,
    max_iterations: int = 50,
    throw: bool = True,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    """Make (q, qd) consistent with the constraints, keeping fixed coordinates.

    Positions: Gauss-Newton iterations on phi(t, q) = 0 that change only the free
    coordinates, each step the minimal-norm correction dq = -pinv(J_free) phi,
    with a backtracking line search on |phi| so that rough guesses converge.
    Velocities: the minimal-norm change of the free velocities that satisfies
    J qd + phi_t = 0 and the velocity constraints A qd + b = 0 (one linear
    least-squares step at the new positions).

    As in a textbook: fix x1 and theta2 of a slider-pendulum, and the constraints
    give the others.

    **Arguments:**

    - `system`: the [`lagrax.System`][].
    - `q`, `qd`: the guesses (n,).
    - `params`: the parameters.
    - `t`: the time at which the constraints must hold.
    - `fixed_q`, `fixed_qd`: indices (or a boolean mask of length n) of the
        coordinates and velocities to keep as given.
    - `tol`: largest acceptable |phi| and |J qd + phi_t|, |A qd + b| (the velocity
        residuals relative to max(1, |qd|)). Default eps^(2/3) of the dtype (4e-11 in
        float64).
    - `max_iterations`: Gauss-Newton iterations at most.
    - `throw`: raise if no consistent state was found within `tol`.

    **Returns:**

    `(q, qd)`, consistent to round-off when the iteration converges.

    **Raises:**

    `ValueError` with the residuals reached, when the constraints cannot be
    satisfied by changing the free coordinates (under `jax.jit`, a runtime error).
    """
    q, qd = coerce_state(q, qd)
    params = coerce_params(params, q.dtype)
    n = q.shape[0]
    free_q = _free_mask("fixed_q", fixed_q, n)
    free_qd = _free_mask("fixed_qd", fixed_qd, n)
    if tol is None:
        tol = default_tol(q.dtype)
    q, qd, res_q, res_qd = _consistent_state(
        system, q, qd, params, jnp.asarray(t, q.dtype), free_q, free_qd, max_iterations
    )
    failed = (res_q > tol) | (res_qd > tol)
    if failures_are_nan():
        return jnp.where(failed, jnp.nan, q), jnp.where(failed, jnp.nan, qd)
    if not throw:
        return q, qd
    message = functools.partial(_raise_unconverged, tol, free_q, free_qd)
    if isinstance(failed, jax.core.Tracer):
        # Under jit: a host callback, so that the message carries the residuals.
        jax.debug.callback(message, failed, res_q, res_qd)
        return q, qd
    message(failed, res_q, res_qd)
    return q, qd


def _raise_unconverged(tol, free_q, free_qd, failed, res_q, res_qd) -> None:
    if not np.any(failed):
        return
    raise ValueError(
        _failure_message()
        + f" Reached max |phi| = {float(np.max(res_q)):.3e}, max |J qd + phi_t| = "
        f"{float(np.max(res_qd)):.3e} (tol {tol:.1e}); free coordinates "
        f"{np.flatnonzero(free_q).tolist()}, free velocities "
        f"{np.flatnonzero(free_qd).tolist()}."
    )


def default_tol(dtype) -> float:
    """The residual below which a state counts as consistent: eps^(2/3)."""
    return float(jnp.finfo(dtype).eps) ** (2 / 3)


def _failure_message() -> str:
    return (
        "consistent_state did not converge: the constraints cannot be satisfied by "
        "changing only the free coordinates from this guess. Check that the fixed "
        "coordinates admit a solution, give a closer guess, or raise max_iterations."
    )


@eqx.filter_jit
def _consistent_state(system, q, qd, params, t, free_q, free_qd, max_iterations):
    free_q = jnp.asarray(free_q, q.dtype)
    free_qd = jnp.asarray(free_qd, q.dtype)
    if num_constraints(system, t, q, params):
        (q_new, _), res_q = _nearest_point(
            system, q, params, t, free_q, max_iterations=max_iterations
        )
    else:
        q_new, res_q = q, jnp.zeros((), q.dtype)
    # The velocities are one linear least-squares step: differentiable as it is.
    jac, rate = velocity_jacobian(system, t, q_new, params)
    if jac.shape[0] == 0:
        return q_new, qd, res_q, jnp.zeros((), q.dtype)
    correction = _min_norm(jac * free_qd, jac @ qd + rate)
    qd = qd - free_qd * correction
    res_qd = _inf(jac @ qd + rate) / jnp.maximum(1, _inf(qd))
    return q_new, qd, res_q, res_qd


def _min_norm(matrix, vector):
    """The least-norm least-squares solution x of matrix x = vector."""
    # throw=False: an SVD solve always succeeds, and a check would put a host
    # callback in the program, which XLA's persistent cache then refuses.
    operator = lnx.MatrixLinearOperator(matrix)
    return lnx.linear_solve(operator, vector, lnx.SVD(), throw=False).value


@eqx.filter_custom_jvp
def _nearest_point(system, q, params, t, free, *, max_iterations):
    return _closest_point(system, q, params, t, free, max_iterations)


@_nearest_point.def_jvp
def _nearest_point_jvp(primals, tangents, *, max_iterations):
    """The implicit function theorem on the least-distance conditions G = 0:
    dG/droot droot = -dG/dinputs dinputs, never differentiating the iterations."""
    system, q, params, t, free = primals
    (x, mu), res = _closest_point(system, q, params, t, free, max_iterations)
    _, t_q, t_params, t_t, _ = tangents

    def of_inputs(q_, params_, t_):
        return _closest_point_conditions((x, mu), system, q_, params_, t_, free)

    out, rhs = eqx.filter_jvp(of_inputs, (q, params, t), (t_q, t_params, t_t))
    # Outputs that no differentiated input reaches come back as None.
    rhs = jax.tree.map(
        lambda r, o: -jnp.zeros_like(o) if r is None else -r,
        rhs,
        out,
        is_leaf=lambda x: x is None,
    )
    operator = lnx.JacobianLinearOperator(
        lambda root, _: _closest_point_conditions(root, system, q, params, t, free),
        (x, mu),
    )
    droot = lnx.linear_solve(operator, rhs, lnx.SVD(), throw=False).value
    return ((x, mu), res), (droot, jnp.zeros_like(res))


def _closest_point(system, q, params, t, free, max_iterations):
    """The point of phi(t, x) = 0 nearest to q that differs from q only in the free
    coordinates, with the multipliers of that least-distance problem.

    First Gauss-Newton with minimal-norm steps and a backtracking line search on
    |phi|, which converges from rough guesses; then the Gauss-Newton iteration of
    the least-distance problem itself, x <- q + F d with
    d = -pinv(J F) (phi(x) + J (q - x)), which moves the point along the manifold
    to the nearest one. Its optimality conditions are what the implicit function
    theorem differentiates (`_closest_point_conditions`).
    """
    dtype = q.dtype
    eps = jnp.finfo(dtype).eps
    steps = jnp.asarray(_STEPS, dtype)

    def residual(x):
        return jnp.linalg.norm(constraint_value(system, t, x, params))

    def small(dx, x):
        return _inf(dx) <= 4 * eps * (1 + _inf(x))

    def newton(carry):
        x, it, res, _ = carry
        phi, jac, _ = constraint_jacobian(system, t, x, params)
        dx = -free * jnp.linalg.lstsq(jac * free, phi)[0]
        trial = jax.vmap(lambda a: residual(x + a * dx))(steps)
        better = trial < res
        first = jnp.argmax(better)  # the longest step that reduces |phi|
        a = jnp.where(better[first], steps[first], 0)
        res = jnp.where(better[first], trial[first], res)
        return x + a * dx, it + 1, res, small(a * dx, x)

    def newton_cond(carry):
        _, it, res, done = carry
        return (it < max_iterations) & (res > 0) & ~done

    x, it, _, _ = jax.lax.while_loop(
        newton_cond, newton, (q, 0, residual(q), jnp.asarray(False))
    )

    def nearest(carry):
        x, it, _ = carry
        phi, jac, _ = constraint_jacobian(system, t, x, params)
        d = jnp.linalg.lstsq(jac * free, phi + jac @ (q - x))[0]
        x_new = q - free * d
        return x_new, it + 1, small(x_new - x, x)

    def nearest_cond(carry):
        _, it, done = carry
        return (it < max_iterations) & ~done

    x, _, _ = jax.lax.while_loop(nearest_cond, nearest, (x, it, jnp.asarray(False)))
    phi, jac, _ = constraint_jacobian(system, t, x, params)
    # Multipliers of min |F (x - q)|^2 / 2 s.t. phi = 0: F (x - q) + F J^T mu = 0.
    mu = -jnp.linalg.lstsq((jac * free).T, free * (x - q))[0]
    return (x, mu), _inf(phi)


def _closest_point_conditions(root, system, q, params, t, free):
    """Optimality of the least-distance problem: zero exactly at its solution."""
    x, mu = root
    phi, jac, _ = constraint_jacobian(system, t, x, params)
    return (x - q) + free * (jac.T @ mu), phi


def _inf(x: Array) -> Array:
    return jnp.max(jnp.abs(x), initial=0)
