"""Accelerations and multipliers at one state, and the diffrax vector field."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import Params, RealScalarLike
from ._inputs import coerce_params, coerce_state
from ._mechanics import Mechanics, mechanics
from ._results import RESULTS
from ._saddle import AbstractSaddleSolver, SaddleSolution, SchurCholesky
from ._stabilization import AbstractStabilization, NoStabilization
from ._system import System


def solve_dynamics(
    system: System,
    stabilization: AbstractStabilization,
    saddle_solver: AbstractSaddleSolver,
    t,
    q,
    qd,
    params: Params,
) -> tuple[Mechanics, SaddleSolution]:
    """The mechanical terms at (t, q, qd) and the saddle solve for (qdd, lam)."""
    terms = mechanics(system, t, q, qd, params)
    rhs = -terms.gamma + stabilization.correction(terms.phi, terms.phi_dot)
    solver = saddle_solver.specialize(system, t, q, qd, params)
    sol = solver.solve(terms.mass, terms.jac, terms.force, rhs)
    finite = all_finite((terms.mass, terms.force, terms.jac, rhs))
    result = RESULTS.where(finite, sol.result, RESULTS.nonfinite_terms)
    return terms, SaddleSolution(sol.qdd, sol.lam, result)


def all_finite(tree) -> Array:
    """Whether every floating-point array in `tree` is free of NaN and inf."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if isinstance(x, jax.Array | np.ndarray | np.generic | float | complex)
        and jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def check_result(x, result: RESULTS, throw: bool):
    """Raise the message of `result` at runtime if it is a failure and `throw`."""
    if throw:
        failed = (result != RESULTS.successful) & (result != RESULTS.event_occurred)
        x = result.error_if(x, failed)
    return x


def accelerations(
    system: System,
    t: RealScalarLike,
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
    stabilization: AbstractStabilization | None = None,
    *,
    saddle_solver: AbstractSaddleSolver | None = None,
    throw: bool = True,
) -> tuple[Float[Array, " n"], Float[Array, " m"]]:
    """Accelerations and Lagrange multipliers at one state.

    Solves the saddle-point system

        M qdd - J^T lam = f,    J qdd = -gamma + stab

    where every term is derived from `system` by autodiff (see the design notes)
    and stab is the stabilization's correction (zero unless Baumgarte).

    **Arguments:**

    - `system`: the [`lagrax.System`][].
    - `t`, `q`, `qd`, `params`: time, coordinates (n,), velocities (n,), parameters.
    - `stabilization`: adds its correction to the constraint right-hand side;
        default none.
    - `saddle_solver`: default [`lagrax.SchurCholesky`][].
    - `throw`: raise at runtime if the saddle system cannot be solved (redundant
        constraints, a mass matrix that is not positive definite).

    **Returns:**

    `(qdd, lam)`: accelerations (n,) and multipliers (m,), the generalized
    constraint forces being J^T lam.
    """
    if stabilization is None:
        stabilization = NoStabilization()
    if saddle_solver is None:
        saddle_solver = SchurCholesky()
    q, qd = coerce_state(q, qd)
    t = jnp.asarray(t, q.dtype)
    params = coerce_params(params)
    return _accelerations(system, stabilization, saddle_solver, t, q, qd, params, throw)


@eqx.filter_jit
def _accelerations(system, stabilization, saddle_solver, t, q, qd, params, throw):
    _, sol = solve_dynamics(system, stabilization, saddle_solver, t, q, qd, params)
    return check_result((sol.qdd, sol.lam), sol.result, throw)


class VectorField(eqx.Module):
    """The first-order vector field (q, qd) -> (qd, qdd) that diffrax integrates.

    A pytree of the system and the strategies, not a closure, so that calls with
    the same system and shapes hit the compilation cache. `args` is `params`.
    """

    system: System
    stabilization: AbstractStabilization
    saddle_solver: AbstractSaddleSolver
    throw: bool = eqx.field(static=True)

    def __call__(self, t, y, params):
        q, qd = y
        _, sol = solve_dynamics(
            self.system, self.stabilization, self.saddle_solver, t, q, qd, params
        )
        qdd = check_result(sol.qdd, sol.result, self.throw)
        # Without `throw`, a failed solve must not yield plausible numbers.
        qdd = jnp.where(sol.result == RESULTS.successful, qdd, jnp.nan)
        return qd, qdd
