"""The `System`: the user's Lagrangian, constraints and forces, held together."""

from collections.abc import Callable

import equinox as eqx

from ._custom_types import (
    ConstraintFn,
    ForceFn,
    LagrangianFn,
    VelocityConstraintFn,
)


def _check_callable(name: str, fn: object, *, optional: bool) -> None:
    if fn is None and optional:
        return
    if not callable(fn):
        raise TypeError(
            f"System: `{name}` must be a function, got {type(fn).__name__}. "
            + _SIGNATURES[name]
        )


_SIGNATURES = {
    "lagrangian": "Write it as `lagrangian(t, q, qd, params) -> scalar`.",
    "constraints": "Write it as `constraints(t, q, params) -> array of shape (m,)`.",
    "forces": "Write it as `forces(t, q, qd, params) -> array of shape (n,)`.",
    "velocity_constraints": "Write it as `velocity_constraints(t, q, qd, params) "
    "-> array of shape (k,)`, affine in qd.",
}


class System(eqx.Module):
    """A mechanical system given by a Lagrangian, constraints and forces.

    The equations of motion are

        d/dt dL/dqd - dL/dq = forces + J^T lam + A^T mu,
        phi(t, q) = 0,     psi(t, q, qd) = A(t, q) qd + b(t, q) = 0,

    with J = dphi/dq, A = dpsi/dqd and (lam, mu) the Lagrange multipliers (the
    constraint forces). The multipliers are reported stacked, holonomic first.
    Every term that the equations need (mass matrix, bias forces, constraint
    Jacobian, its time derivatives) is derived by automatic differentiation.

    The functions are held as they are; shapes are checked when lagrax first
    traces them, with an error that names the function at fault.

    **Arguments:**

    - `lagrangian`: `lagrangian(t, q, qd, params) -> scalar`, usually T - V.
    - `constraints`: `constraints(t, q, params) -> (m,)`, the holonomic constraints
        phi(t, q) = 0; they may depend on t explicitly (driving constraints).
        `None` for an unconstrained system.
    - `forces`: `forces(t, q, qd, params) -> (n,)`, generalized non-conservative
        forces (damping, actuation, ...). `None` for none.
    - `velocity_constraints`: `velocity_constraints(t, q, qd, params) -> (k,)`,
        nonholonomic (Pfaffian) constraints psi = A(t, q) qd + b(t, q) = 0, which
        must be affine in qd (a knife edge, a rolling disc). lagrax differentiates
        them once to the acceleration level and solves them in the same saddle
        system as the holonomic ones. `None` for none.

    A `System` is a pytree: keep one instance and reuse it, so that repeated calls
    to [`lagrax.simulate`][] hit the compilation cache (the functions are compared
    by identity).
    """

    lagrangian: LagrangianFn
    constraints: ConstraintFn | None = None
    forces: ForceFn | None = None
    velocity_constraints: VelocityConstraintFn | None = None

    def __check_init__(self):
        _check_callable("lagrangian", self.lagrangian, optional=False)
        _check_callable("constraints", self.constraints, optional=True)
        _check_callable("forces", self.forces, optional=True)
        _check_callable(
            "velocity_constraints", self.velocity_constraints, optional=True
        )


def function_name(fn: Callable) -> str:
    """A readable name of a user function, for error messages."""
    return getattr(fn, "__qualname__", None) or type(fn).__name__
