"""Accelerations and multipliers at one state, and the diffrax vector field."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import Params, RealScalarLike
from ._errors import check_result
from ._inputs import all_finite, coerce_params, coerce_state
from ._mechanics import Mechanics, mechanics
from ._projection import AbstractClosedFormProjection
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
    """The mechanical terms at (t, q, qd) and the saddle solve for (qdd, lam).

    Traced once per system, strategies and shapes, and reused: one simulation
    calls this from the integrator's stages, its first step size, the saved
    states and the diagnosis, and a gradient differentiates each call. Behind
    `jit`, JAX traces it (and its derivatives) once for all of them; XLA inlines
    the calls, so the compiled program is the same. A gradient of a whole
    simulation traces ~3x faster so.
    """
    # The time as an array: a Python float would be a static argument, one
    # compilation per value in eager use.
    return _solve_dynamics(
        system, stabilization, saddle_solver, jnp.asarray(t, q.dtype), q, qd, params
    )


@eqx.filter_jit
def _solve_dynamics(system, stabilization, saddle_solver, t, q, qd, params):
    terms = mechanics(system, t, q, qd, params)
    rhs = -terms.gamma + stabilization.correction(terms.phi, terms.phi_dot)
    decoupled = _decoupled_rows(system, saddle_solver, terms.jac.shape[0])
    if decoupled is None:
        sol = saddle_solver.solve_motion(
            system, t, q, qd, params, terms.mass, terms.jac, terms.force, rhs
        )
        qdd, lam = sol.qdd, sol.lam
    else:
        solved, rows = decoupled
        jac = terms.jac[solved]
        sol = saddle_solver.solve_motion(
            system, t, q, qd, params, terms.mass, jac, terms.force, rhs[solved]
        )
        # The rows' own part: M^-1 J_r^T is along J_r^T, and the other rows'
        # accelerations are blind to it (J J_r^T = 0).
        jac_r = terms.jac[rows]
        norm2 = jnp.sum(jac_r**2, axis=1)
        qdd = sol.qdd + jac_r.T @ ((rhs[rows] - jac_r @ sol.qdd) / norm2)
        residual = terms.mass @ qdd - terms.force - jac.T @ sol.lam
        order = np.argsort(np.concatenate([solved, rows]))  # static
        lam = jnp.concatenate([sol.lam, jac_r @ residual / norm2])[order]
    finite = all_finite((terms.mass, terms.force, terms.jac, rhs))
    result = RESULTS.where(finite, sol.result, RESULTS.nonfinite_terms)
    return terms, SaddleSolution(qdd, lam, result)


def _decoupled_rows(
    system, saddle_solver, m: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows solved, rows added in closed form) of the m rows, where the
    constraints name decoupled rows (`decoupled_rows`: a tree model's unit
    quaternions); None: one saddle solve of all rows. Never with velocity
    constraints, whose rows need not be orthogonal to them, nor with a saddle
    solver that derives more of the rows from the system itself
    (`SingularLimit`: its own solve_motion)."""
    constraints = system.constraints
    if (
        not isinstance(constraints, AbstractClosedFormProjection)
        or system.velocity_constraints is not None
        or type(saddle_solver).solve_motion is not AbstractSaddleSolver.solve_motion
    ):
        return None
    rows = np.asarray(constraints.decoupled_rows(), int)
    if rows.size == 0:
        return None
    return np.setdiff1d(np.arange(m), rows), rows


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
    params = coerce_params(params, q.dtype)
    qdd, lam, result = _accelerations(
        system, stabilization, saddle_solver, t, q, qd, params
    )
    # Checked outside the compiled program (see `_errors.py`).
    return check_result((qdd, lam), result, throw)


@eqx.filter_jit
def _accelerations(system, stabilization, saddle_solver, t, q, qd, params):
    _, sol = solve_dynamics(system, stabilization, saddle_solver, t, q, qd, params)
    return sol.qdd, sol.lam, sol.result


class VectorField(eqx.Module):
    """The first-order vector field (q, qd) -> (qd, qdd) that diffrax integrates.

    A pytree of the system and the strategies, not a closure, so that calls with
    the same system and shapes hit the compilation cache. `args` is `params`.
    Where the saddle solve fails, qdd is NaN: the solver then rejects the step,
    and `simulate` finds the cause at the state where it stopped.
    """

    system: System
    stabilization: AbstractStabilization
    saddle_solver: AbstractSaddleSolver

    def __call__(self, t, y, params):
        q, qd = y
        _, sol = solve_dynamics(
            self.system, self.stabilization, self.saddle_solver, t, q, qd, params
        )
        # A failed solve must not yield plausible numbers.
        qdd = jnp.where(sol.result == RESULTS.successful, sol.qdd, jnp.nan)
        return qd, qdd
