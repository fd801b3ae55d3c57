"""Saddle-point (KKT) solvers: (M, J, f, rhs) -> (qdd, lam).

Every solver returns the solution of

    [ M  -J^T ] [ qdd ]   [ f   ]
    [ J   0   ] [ lam ] = [ rhs ]

together with a result code that says whether the system was solvable as posed.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import lineax as lnx
from jaxtyping import Array, Float

from . import _dense as dense
from ._custom_types import Params
from ._results import RESULTS
from ._structure import constant_diagonal_mass
from ._system import System


class SaddleSolution(eqx.Module):
    """Accelerations, multipliers and a result code from a saddle-point solve."""

    qdd: Float[Array, " n"]
    lam: Float[Array, " m"]
    result: RESULTS


def _default_tol(dtype, tol: float | None) -> Array:
    # Dependent rows of J leave a Cholesky pivot of W at round-off level, a few eps
    # relative to the diagonal; 1e3 eps separates those from any system whose
    # accelerations are still meaningful in this precision.
    if tol is None:
        tol = 1e3 * float(jnp.finfo(dtype).eps)
    return jnp.asarray(tol, dtype)


def _pivots_ok(pivots: Array, diagonal: Array, tol: Array) -> Array:
    """True when a Cholesky factorization exists and no pivot is at round-off level.

    `pivots` is the diagonal of the factor, `diagonal` that of the matrix.
    """
    if pivots.shape[0] == 0:
        return jnp.asarray(True)
    scale = jnp.max(jnp.abs(diagonal))
    return jnp.all(jnp.isfinite(pivots)) & jnp.all(pivots**2 > tol * scale)


class AbstractSaddleSolver(eqx.Module):
    """Solves the acceleration-level saddle-point system of a constrained system.

    Subclasses implement `solve(mass, jac, force, rhs) -> SaddleSolution`.
    """

    @abc.abstractmethod
    def solve(
        self,
        mass: Float[Array, "n n"],
        jac: Float[Array, "m n"],
        force: Float[Array, " n"],
        rhs: Float[Array, " m"],
    ) -> SaddleSolution:
        """Solve `M qdd - J^T lam = force`, `J qdd = rhs`."""

    def specialize(
        self, system: System, t, q, qd, params: Params
    ) -> "AbstractSaddleSolver":
        """The solver to use for `system`'s saddle systems, chosen at trace time.

        Lets a solver switch to a faster strategy for the structure of a system's
        mass matrix. The default is the solver itself.
        """
        del system, t, q, qd, params
        return self

    def solve_motion(
        self, system: System, t, q, qd, params: Params, mass, jac, force, rhs
    ) -> SaddleSolution:
        """The saddle solve of the equations of motion at the state (t, q, qd).

        What the dynamics calls (projections call `solve`). The default
        specializes to `system` and solves; a wrapper that needs more of the
        state than (M, J, f, rhs) ([`lagrax.SingularLimit`][]) derives it here.
        """
        solver = self.specialize(system, t, q, qd, params)
        return solver.solve(mass, jac, force, rhs)


class SchurCholesky(AbstractSaddleSolver):
    """Schur complement with Cholesky factorizations: the default.

    With M = L L^T (Cholesky), Y = L^-1 J^T and z = L^-1 f, the multipliers solve
    the Delassus system W lam = rhs - Y^T z with W = J M^-1 J^T = Y^T Y (a second,
    m x m Cholesky), and qdd = L^-T (z + Y lam). Two small Cholesky factorizations
    and triangular solves instead of a pivoted LU of the (n + m) KKT matrix; for
    small systems written out in scalar operations, which fuse into one loop under
    vmap: the fast choice for the small dense systems of mechanics.

    Needs M symmetric positive definite and J of full row rank. A rank-deficient J
    (redundant constraints) gives the result `redundant_constraints`; use
    [`lagrax.LeastSquares`][] for those.

    **Arguments:**

    - `rank_tol`: a Cholesky pivot squared below `rank_tol` times the largest
        diagonal entry counts as zero. Default 1e3 machine epsilons of the dtype.
    - `detect_structure`: when the mass matrix is diagonal and independent of the
        state (point masses in Cartesian coordinates), found at trace time (see
        `lagrax._structure`), skip its factorization: only the m x m Delassus
        matrix is factorized. Default True; the result is the same either way.
    """

    rank_tol: float | None = None
    detect_structure: bool = eqx.field(default=True, static=True)

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        return _schur(False, self.rank_tol, mass, jac, force, rhs)

    def specialize(self, system, t, q, qd, params) -> AbstractSaddleSolver:
        if self.detect_structure and constant_diagonal_mass(system, t, q, qd, params):
            return _DiagonalMassSchur(self.rank_tol)
        return self


class _DiagonalMassSchur(AbstractSaddleSolver):
    """`SchurCholesky` for a mass matrix known to be diagonal: reads its diagonal."""

    rank_tol: float | None = None

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        return _schur(True, self.rank_tol, mass, jac, force, rhs)


def _schur(diagonal, rank_tol, mass, jac, force, rhs) -> SaddleSolution:
    tol = _default_tol(mass.dtype, rank_tol)
    sol = dense.schur_solve(diagonal, mass, jac, force, rhs)
    mass_ok = _pivots_ok(sol.pivots_mass, jnp.diagonal(mass), tol)
    independent = _pivots_ok(sol.pivots_delassus, sol.diag_delassus, tol)
    result = RESULTS.where(
        independent, RESULTS.successful, RESULTS.redundant_constraints
    )
    result = RESULTS.where(mass_ok, result, RESULTS.mass_matrix_not_positive_definite)
    return SaddleSolution(sol.qdd, sol.lam, result)


class DenseLU(AbstractSaddleSolver):
    """Pivoted LU factorization of the whole (n + m) x (n + m) KKT matrix.

    The general-purpose choice: M need not be positive definite, only the KKT
    matrix nonsingular (M positive definite on the null space of J, J of full row
    rank). Slower than [`lagrax.SchurCholesky`][] for the usual SPD mass matrix.

    **Arguments:**

    - `rank_tol`: a pivot of U below `rank_tol` times the largest pivot counts as
        zero (result `singular_saddle_matrix`). Default 1e3 machine epsilons.
    """

    rank_tol: float | None = None

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        n, m = mass.shape[0], jac.shape[0]
        kkt = jnp.block([[mass, -jac.T], [jac, jnp.zeros((m, m), mass.dtype)]])
        lu, piv = jsl.lu_factor(kkt)
        sol = jsl.lu_solve((lu, piv), jnp.concatenate([force, rhs]))
        pivots = jnp.abs(jnp.diagonal(lu))
        tol = _default_tol(mass.dtype, self.rank_tol)
        ok = jnp.all(jnp.isfinite(sol)) & (jnp.min(pivots) > tol * jnp.max(pivots))
        result = RESULTS.where(ok, RESULTS.successful, RESULTS.singular_saddle_matrix)
        return SaddleSolution(sol[:n], sol[n:], result)


class LeastSquares(AbstractSaddleSolver):
    """Minimal-norm multipliers for redundant (rank-deficient) constraints.

    When rows of J are dependent (the same constraint twice, the dependent loop
    equation of a planar four-bar), the accelerations are still unique but the
    multipliers are not. This solver returns the unique accelerations and, of all
    multipliers that produce them, the one of least norm:

        lam = pinv(W) (rhs - J M^-1 f),   W = J M^-1 J^T,

    computed stably from the singular value decomposition of Y = L^-1 J^T
    (M = L L^T) as lam = pinv(Y) (pinv(Y^T) rhs - z), z = L^-1 f, with lineax's
    SVD solver, whose derivatives are those of the pseudoinverse solution.
    Singular values below `rcond` times the largest count as zero. The default
    sqrt(eps) of the dtype also absorbs a constraint drift of that relative size.

    Needs M symmetric positive definite.
    """

    rcond: float | None = None

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        chol = jnp.linalg.cholesky(mass)
        tol = _default_tol(mass.dtype, None)
        mass_ok = _pivots_ok(jnp.diagonal(chol), jnp.diagonal(mass), tol)
        z = jsl.solve_triangular(chol, force, lower=True)
        solved = jnp.asarray(True)
        if jac.shape[0] == 0:
            lam = jnp.zeros((0,), mass.dtype)
        else:
            rcond = self.rcond
            if rcond is None:
                rcond = float(jnp.finfo(mass.dtype).eps) ** 0.5
            svd = lnx.SVD(rcond=rcond)
            y = jsl.solve_triangular(chol, jac.T, lower=True)
            # throw=False: a failure is this solver's result code, never an error
            # raised from inside the integration.
            c = lnx.linear_solve(lnx.MatrixLinearOperator(y.T), rhs, svd, throw=False)
            lam = lnx.linear_solve(
                lnx.MatrixLinearOperator(y), c.value - z, svd, throw=False
            )
            solved = (c.result == lnx.RESULTS.successful) & (
                lam.result == lnx.RESULTS.successful
            )
            lam = lam.value
            z = z + y @ lam
        qdd = jsl.solve_triangular(chol.T, z, lower=False)
        result = RESULTS.where(solved, RESULTS.successful, RESULTS.nonfinite_terms)
        result = RESULTS.where(
            mass_ok, result, RESULTS.mass_matrix_not_positive_definite
        )
        return SaddleSolution(qdd, lam, result)


class AugmentedLagrangian(AbstractSaddleSolver):
    """The augmented Lagrangian iteration: redundant constraints, singular
    configurations and a singular mass matrix in one method.

    With A = M + alpha J^T J (factorized once per solve) and lam_0 = 0, each
    iteration solves

        A qdd = f + J^T lam_k + alpha J^T rhs,    lam_k+1 = lam_k + alpha (rhs - J qdd)

    (Bayo, Garcia de Jalon & Serna 1988; Bayo & Ledesma 1996): M qdd - J^T lam = f
    holds after every iteration, and J qdd = rhs is reached geometrically, the
    error in a constraint direction of the Delassus matrix W = J M^-1 J^T with
    eigenvalue w shrinking by 1 / (1 + alpha w) per iteration. A is positive
    definite whenever M is positive definite on the null space of J, so:

    - redundant constraints (dependent rows of J) are accepted; the multipliers
      stay in the range of J, the least-norm ones (as [`lagrax.LeastSquares`][]);
    - a mass matrix that is only positive semidefinite (slender bars, massless
      links) is accepted where the constraints hold the directions it misses;
    - at a singular configuration (J losing rank for an instant) the lost
      direction gets no constraint force and the solve stays bounded; near one,
      a direction with alpha w small converges slowly, so the solution is
      smoothly regularized there instead of amplifying round-off and drift by
      1 / w as an exact solve does.

    Costs one Cholesky factorization of the n x n matrix A and `iterations`
    pairs of triangular solves: no m x m factorization, so more per solve than
    [`lagrax.SchurCholesky`][] for small m and less for many constraints (see
    `benchmarks/saddle_vmap.py`).

    **Arguments:**

    - `penalty`: alpha relative to the model, alpha = penalty * tr(M) / tr(J^T J)
        (so the default suits any units). Larger converges in fewer iterations
        and regularizes a narrower neighbourhood of a singular configuration;
        beyond ~1e10 A loses the accuracy the iterations must recover.
    - `iterations`: a fixed count (so that the solve is differentiable in both
        modes and vmaps without waiting). Three reach round-off with the
        default penalty away from singular configurations.

    References: E. Bayo, J. Garcia de Jalon, M. A. Serna, "A modified Lagrangian
    formulation for the dynamic analysis of constrained mechanical systems",
    Comput. Methods Appl. Mech. Eng. 71 (1988) 183-195; E. Bayo, R. Ledesma,
    "Augmented Lagrangian and mass-orthogonal projection methods for constrained
    multibody dynamics", Nonlinear Dyn. 9 (1996) 113-130.
    """

    penalty: float = 1e9
    iterations: int = eqx.field(static=True, default=3)

    def __check_init__(self):
        if not self.penalty > 0:
            raise ValueError(
                f"AugmentedLagrangian(penalty={self.penalty}): the penalty must be "
                "positive (1e6-1e10; default 1e9)."
            )
        if self.iterations < 1:
            raise ValueError(
                f"AugmentedLagrangian(iterations={self.iterations}): give at least "
                "one iteration."
            )

    def solve(self, mass, jac, force, rhs) -> SaddleSolution:
        dtype = mass.dtype
        if jac.shape[0] == 0:
            matrix = mass
            solve_a, pivots = dense.cholesky(matrix)
            qdd = solve_a(force)
            lam = jnp.zeros((0,), dtype)
        else:
            jtj = jac.T @ jac
            # The scale of M over that of J^T J. Where J vanishes altogether
            # (every constraint singular at once, a point on x y = 0 at the
            # origin) A = M whatever alpha is: any finite scale will do.
            size_j = jnp.trace(jtj)
            scale = jnp.trace(mass) / jnp.where(size_j > 0, size_j, 1)
            alpha = jnp.asarray(self.penalty, dtype) * scale
            matrix = mass + alpha * jtj
            solve_a, pivots = dense.cholesky(matrix)

            def iterate(_, state):
                # The iteration in correction form: the residuals of the two
                # equations as posed (well scaled), and only the correction
                # from A, whose conditioning grows with alpha. Iterative
                # refinement so recovers the digits a solve with A loses.
                qdd_, lam_ = state
                r_force = force + jac.T @ lam_ - mass @ qdd_
                r_con = rhs - jac @ qdd_
                step = solve_a(r_force + alpha * (jac.T @ r_con))
                return qdd_ + step, lam_ + alpha * (r_con - jac @ step)

            start = (jnp.zeros_like(force), jnp.zeros_like(rhs))
            qdd, lam = jax.lax.fori_loop(0, self.iterations, iterate, start)
        tol = _default_tol(dtype, None)
        ok = _pivots_ok(pivots, jnp.diagonal(matrix), tol)
        ok = ok & jnp.all(jnp.isfinite(qdd)) & jnp.all(jnp.isfinite(lam))
        result = RESULTS.where(
            ok, RESULTS.successful, RESULTS.mass_matrix_not_positive_definite
        )
        return SaddleSolution(qdd, lam, result)
