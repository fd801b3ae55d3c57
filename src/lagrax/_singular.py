"""The physical accelerations at and near a singular configuration, for any solver.

At a singular configuration the constraint Jacobian J loses rank for an instant:
a left singular vector u of J has u^T J = 0 (links aligned). The acceleration
equation u^T (J qdd + gamma) = 0 then reads 0 = 0 and no longer determines qdd
in the lost direction; nearby it reads sigma v^T qdd = -u^T gamma with sigma
small, which amplifies any error of the state off the constraint manifold by
1 / sigma. The motion itself is smooth through the instant, and its acceleration
is the limit along the motion. Differentiating u^T (J qdd + gamma) = 0 once more
in time, with u held (u^T J = 0 at the instant, and gamma quadratic in qd so that
d gamma / d qd = 2 J-dot):

    u^T (3 J-dot qdd + c) = 0,    c = gamma_t + gamma_q qd,

an equation in qdd that holds along the motion (exactly at the instant; nearby
to O(sigma)) and does not degenerate there where the crossing is transversal
(u^T J-dot != 0). The force that enforces it is the limit of J^T u lam_u with
J^T u ~ (t - t*) J-dot^T u: the direction J-dot^T u. So the lost row u^T J of
the saddle system is replaced by u^T J-dot, and its right-hand side by
-u^T c / 3, which keeps the system symmetric and lets any saddle solver solve it.
"""

import jax
import jax.numpy as jnp

from ._custom_types import Params
from ._mechanics import constraint_terms, constraint_value
from ._saddle import AbstractSaddleSolver, LeastSquares, SaddleSolution, SchurCholesky
from ._system import System


class SingularLimit(AbstractSaddleSolver):
    """Wraps a saddle solver so that it passes singular configurations with the
    physical accelerations: the limit along the motion, not a minimum-norm guess.

    Where a singular value sigma of the constraint Jacobian J falls below `rcond`
    times the largest, the acceleration equation of that direction u (left
    singular vector), u^T (J qdd + gamma) = 0, which degenerates there, is
    replaced by its time derivative at the instant,

        u^T (3 J-dot qdd + gamma_t + gamma_q qd) = 0,

    with the constraint force along J-dot^T u, the limit of J^T u lam_u (see
    `docs/singular.md`). The wrapped solver (`SchurCholesky`, `DenseLU` or
    `LeastSquares`) solves the result: at the singular instant itself the
    accelerations are those of the motion through it, and in the band around it
    they are accurate to O(sigma) instead of amplifying the state's drift from the
    constraints by 1 / sigma.

    Costs an SVD of J, the derivatives J-dot and gamma-dot (one more forward-mode
    derivative of the constraints) and the wrapped solve, every step: use it for
    models that do pass singular configurations. Position and velocity
    projections take the minimal-norm correction ([`lagrax.LeastSquares`][] with
    the same `rcond`), which leaves the lost direction as it is.

    The multiplier of a lost direction grows without bound as the instant nears
    (its force J^T u lam_u stays finite): it is reported as zero there, its force
    being in the accelerations. Holonomic constraints phi(t, q) only: for velocity
    constraints, use [`lagrax.AugmentedLagrangian`][]. Derivatives through the
    band hold the singular basis fixed.

    **Arguments:**

    - `solver`: the saddle solver to wrap (default [`lagrax.SchurCholesky`][]).
        With [`lagrax.LeastSquares`][] redundant constraints are accepted too.
    - `rcond`: the band: singular values of J below `rcond` times the largest
        take the limit equation. Default 1e-4: narrower bands let the 1 / sigma
        amplification of drift outside them cost steps at tight tolerances,
        wider ones can take in a direction that is small but not singular
        (`benchmarks/singular.py --solvers singular_limit --rconds ...` measures
        the choice). Where every row of J vanishes at once (one constraint, or
        a point at a crossing of curves) there is no larger singular value to
        compare with: the limit equation is taken at the instant only.
    """

    solver: AbstractSaddleSolver = SchurCholesky()
    rcond: float = 1e-4

    def __check_init__(self):
        if not 0 < self.rcond < 1:
            raise ValueError(
                f"SingularLimit(rcond={self.rcond}): rcond must lie in (0, 1) "
                "(default 1e-4)."
            )
        if isinstance(self.solver, SingularLimit):
            raise ValueError("SingularLimit(solver=SingularLimit(...)): wrap once.")

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        # Without the state (a projection's correction): minimal norm.
        return LeastSquares(self.rcond).solve(mass, jac, force, rhs)

    def solve_motion(
        self, system: System, t, q, qd, params: Params, mass, jac, force, rhs
    ) -> SaddleSolution:
        if system.velocity_constraints is not None:
            raise ValueError(
                "SingularLimit: the limit equations are derived for holonomic "
                "constraints phi(t, q); this system has velocity constraints. Use "
                "saddle_solver=lx.AugmentedLagrangian()."
            )
        m = jac.shape[0]
        solver = self.solver.specialize(system, t, q, qd, params)
        if m == 0:
            return solver.solve(mass, jac, force, rhs)
        jdot, c = _limit_terms(system, t, q, qd, params)
        # The basis is held fixed under differentiation: the solution does not
        # depend on it where no direction is lost, and the derivative of a
        # basis of (near-)repeated singular values is not defined.
        u, s, _ = jnp.linalg.svd(jax.lax.stop_gradient(jac), full_matrices=True)
        s = jnp.zeros((m,), s.dtype).at[: s.shape[0]].set(s)
        lost = s <= self.rcond * s[0]
        rows = jnp.where(lost[:, None], u.T @ jdot, u.T @ jac)
        rows_rhs = jnp.where(lost, -(u.T @ c) / 3, u.T @ rhs)
        sol = solver.solve(mass, rows, force, rows_rhs)
        lam = u @ jnp.where(lost, 0, sol.lam)
        return SaddleSolution(sol.qdd, lam, sol.result)


def _limit_terms(system: System, t, q, qd, params: Params):
    """(J-dot, gamma_t + gamma_q qd) at (t, q, qd): d/dt J and the part of d/dt
    gamma free of qdd, by forward-mode derivatives along (1, qd)."""
    one = jnp.ones((), q.dtype)

    def jac_fn(t_, q_):
        return jax.jacfwd(lambda x: constraint_value(system, t_, x, params))(q_)

    def gamma_fn(t_, q_):
        return constraint_terms(system, t_, q_, qd, params)[2]

    _, jdot = jax.jvp(jac_fn, (t, q), (one, qd))
    _, c = jax.jvp(gamma_fn, (t, q), (one, qd))
    return jdot, c
