"""Saddle-point (KKT) solvers: (M, J, f, rhs) -> (qdd, lam).

Every solver returns the solution of

    [ M  -J^T ] [ qdd ]   [ f   ]
    [ J   0   ] [ lam ] = [ rhs ]

together with a result code that says whether the system was solvable as posed.
"""

import abc

import equinox as eqx
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
