"""A primal-dual interior-point method for small dense nonlinear programs,

    min f(x)   s.t.   c(x) = 0,   lower <= x <= upper,

in one `lax.while_loop`: jit-compiled, and `vmap`-able over many problems. The
method of IPOPT (A. Wachter and L. T. Biegler, "On the implementation of an
interior-point filter line-search algorithm for large-scale nonlinear
programming", Math. Program. 106, 2006): its filter line search with up to four
second-order corrections and its default constants, and with the inertia of the
KKT matrix read from its eigenvalues, or above 128 rows from a Cholesky
factorization of its Schur complement (dense: no inertia-revealing sparse
factorization needed). In place of IPOPT's restoration phase (a second
optimisation problem) a short one: where backtracking fails, backtracking on
the least-norm step to the linearized constraints (min dx^T (Sigma + I) dx
s.t. J dx = -c, the barrier's Sigma kept, the Hessian left out), accepted once
the violation falls, after which the filter starts again. It rescues searches
stalled by the filter (the swing-up with a 0.114 kg pole) and by a huge Newton
step (the swing-up in (x, theta) with a 0.16905 kg pole, where the violation
falls along the Newton step of c = 0 only over 1e-5 of it); it does not
rescue a problem whose linearized
constraints point away from the bounds (Wachter and Biegler's own example in
the paper above, min x1 s.t. x1^2 - x2 - 1 = 0, x1 - x3 - 1/2 = 0, x2, x3 >= 0
from (-2, 1, 1), still ends with a failed line search, reported).

It is the solver of `optimize_controls` (docs/optimisation.md section 3); the
Hessian of the Lagrangian is exact (the caller's, or `jax.hessian`).
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree


class NLPSolution(eqx.Module):
    """What [`interior_point`][] found.

    **Fields:**

    - `x`: the solution.
    - `multipliers`: lambda of the equality constraints (sign: grad f + A^T lambda
        - z_lower + z_upper = 0).
    - `z_lower`, `z_upper`: multipliers of the bounds (>= 0).
    - `objective`: f(x).
    - `max_violation`: max |c(x)|.
    - `kkt_error`: the optimality error (scaled dual infeasibility, violation and
        complementarity, the largest of them).
    - `iterations`: Newton iterations taken.
    - `converged`: kkt_error <= tol.
    - `failed`: the line search or the inertia correction could not go on.
    """

    x: Array
    multipliers: Array
    z_lower: Array
    z_upper: Array
    objective: Array
    max_violation: Array
    kkt_error: Array
    iterations: Array
    converged: Array
    failed: Array


class Elimination(eqx.Module):
    """The first `size` constraints determine the first `size` unknowns: their
    Jacobian block Jy = dc[:size]/dx[:size] is lower triangular with a unit
    diagonal. `solve` applies Jy^-1 (or Jy^-T) to a vector or matrix; this one
    by a dense triangular solve. A caller whose Jy has more structure (multiple
    shooting: block bidiagonal) subclasses it with a cheaper `solve`."""

    size: int = eqx.field(static=True)

    def solve(self, jac: Array, b: Array, transpose: bool = False) -> Array:
        return _solve_unit_lower(jac[: self.size, : self.size], b, int(transpose))


class AbstractHessian(eqx.Module):
    """The Hessian of the Lagrangian as the products the condensed Newton step
    needs, for a caller who knows its structure (`hessian` may return one of
    these instead of an (n, n) array): `mv(v) = W v`, `sandwich(p) = p^T W p`
    for p of shape (n, k), and `dense()`, the (n, n) array (where nothing is
    eliminated)."""

    @abc.abstractmethod
    def mv(self, v: Array) -> Array:
        """W v."""

    @abc.abstractmethod
    def sandwich(self, p: Array) -> Array:
        """p^T W p."""

    @abc.abstractmethod
    def dense(self) -> Array:
        """W as an (n, n) array."""


class _Zero(AbstractHessian):
    size: int = eqx.field(static=True)
    dtype: jnp.dtype = eqx.field(static=True)

    def mv(self, v):
        return jnp.zeros_like(v)

    def sandwich(self, p):
        return jnp.zeros((p.shape[1], p.shape[1]), p.dtype)

    def dense(self):
        return jnp.zeros((self.size, self.size), self.dtype)


class _Dense(AbstractHessian):
    matrix: Array

    def mv(self, v):
        return self.matrix @ v

    def sandwich(self, p):
        return p.T @ self.matrix @ p

    def dense(self):
        return self.matrix


def interior_point(
    objective: Callable[[Array, PyTree], Array],
    constraints: Callable[[Array, PyTree], Array],
    x0: Array,
    lower: Array,
    upper: Array,
    args: PyTree = None,
    *,
    hessian: Callable | None = None,
    jacobian: Callable | None = None,
    eliminate: int | Elimination = 0,
    tol: float = 1e-8,
    max_steps: int = 200,
    progress: Callable | None = None,
) -> NLPSolution:
    """Solve min f(x) s.t. c(x) = 0, lower <= x <= upper from x0.

    **Arguments:**

    - `objective`: `f(x, args) -> scalar`.
    - `constraints`: `c(x, args) -> (m,)` (m may be 0).
    - `x0`: the start (n,); moved inside the bounds if it is not.
    - `lower`, `upper`: bounds (n,), `-inf` / `inf` where there are none.
    - `args`: passed to the functions; a batch of problems is `jax.vmap` over it.
    - `hessian`: `hessian(x, lam, args) -> (n, n)`, the Hessian of
        f + lam . c (or a [`AbstractHessian`][] of it); default by
        `jax.hessian`.
    - `jacobian`: `jacobian(x, args) -> (m, n)`, the Jacobian of c; default by
        `jax.jacfwd`.
    - `eliminate`: e > 0 when the first e constraints determine the first e
        unknowns: their Jacobian block dc[:e]/dx[:e] is lower triangular with a
        unit diagonal (as the continuity conditions of multiple shooting,
        S_(k+1) - F(S_k, ...) = 0 in node order, determine the node states).
        Each Newton step then eliminates them (condensing, Bock & Plitt 1984) and
        factorizes a KKT matrix of the other n - e unknowns and m - e constraints
        only; the step is the same. An [`Elimination`][] instead of e applies
        Jy^-1 the caller's way.
    - `tol`: the optimality error at which to stop.
    - `max_steps`: Newton iterations at most.
    - `progress`: `progress(iteration, objective, violation, kkt_error, mu,
        alpha, delta_w)` (alpha and delta_w of the step that led there), called
        from the compiled loop (`jax.debug.callback`) once per iteration.

    **Returns:**

    An [`NLPSolution`][].
    """
    # The defaults are made inside the compiled function: a closure made here
    # would be a new static argument of every call, and recompile it.
    return _solve(
        objective, constraints, hessian, jacobian, x0, lower, upper, args, tol,
        max_steps, progress, eliminate,
    )  # fmt: skip


def _one_at_a_time(fn):
    """`fn` with a batching rule that maps it over the batch (`lax.map`)
    instead of calling it once on the whole batch.

    For the dense linear algebra below, which `jax.vmap` over many problems
    would batch. jaxlib 0.10's CPU LAPACK kernels split a batch across XLA's
    intra-op thread pool and block their own pool thread until the pieces
    finish; where the executor runs as many such kernels at once as the pool
    has threads (two on a 2-core machine: the factorization of one problem
    beside the solve of another), every thread waits for work that no thread
    is free to run, and the program hangs, idle. Called one problem at a
    time, each kernel has no batch to split (jaxlib 0.11 removed the split).
    The matrices are small: a loop over the problems costs little beside the
    simulations, which stay batched.
    """

    @jax.custom_batching.custom_vmap
    def one_at_a_time(*args):
        return fn(*args)

    @one_at_a_time.def_vmap
    def _rule(axis_size, in_batched, *args):
        args = jax.tree.map(
            lambda a, batched: (
                a if batched else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
            ),
            args,
            tuple(in_batched),
        )
        out = jax.lax.map(lambda a: one_at_a_time(*a), args)
        return out, jax.tree.map(lambda _: True, out)

    return one_at_a_time


_eigvalsh = _one_at_a_time(jnp.linalg.eigvalsh)
_cholesky = _one_at_a_time(jnp.linalg.cholesky)
_lu_factor = _one_at_a_time(jax.scipy.linalg.lu_factor)
_lu_solve = _one_at_a_time(
    lambda lu, pivots, b: jax.scipy.linalg.lu_solve((lu, pivots), b)
)
_solve_unit_lower_n, _solve_unit_lower_t = (
    _one_at_a_time(
        lambda a, b, trans=trans: jax.scipy.linalg.solve_triangular(
            a, b, trans=trans, lower=True, unit_diagonal=True
        )
    )
    for trans in (0, 1)
)


def _solve_unit_lower(a, b, trans=0):
    return (_solve_unit_lower_t if trans else _solve_unit_lower_n)(a, b)


# IPOPT's defaults (Wachter & Biegler 2006, table 1 and section 3).
_MU0, _KAPPA_EPS, _KAPPA_MU, _THETA_MU = 0.1, 10.0, 0.2, 1.5
_TAU_MIN, _S_MAX, _KAPPA_SIGMA, _PUSH = 0.99, 100.0, 1e10, 1e-2
_MAX_BACKTRACKS = 40
_GAMMA_THETA, _GAMMA_PHI, _ETA_PHI, _S_THETA, _S_PHI = 1e-5, 1e-8, 1e-8, 1.1, 2.3
_FILTER = 64  # filter entries kept (when full, the newest overwrites the last)
_RESTORE_AFTER = 14  # trials of the line search before it restores feasibility
_EIGEN_UP_TO = 128  # KKT matrices up to this size: inertia from the eigenvalues
_MAX_SOC, _KAPPA_SOC = 4, 0.99  # second-order corrections in a row, and their decrease


@eqx.filter_jit
def _solve(objective, constraints, hessian, jacobian, x0, lower, upper, args, tol,
           max_steps, progress, eliminate):  # fmt: skip
    if hessian is None:

        def hessian(x, lam, args):
            return jax.hessian(
                lambda x: objective(x, args) + lam @ constraints(x, args)
            )(x)

    if jacobian is None:

        def jacobian(x, args):
            return jax.jacfwd(constraints)(x, args)

    dtype = jnp.result_type(x0, float)
    x0, lower, upper = (jnp.asarray(v, dtype) for v in (x0, lower, upper))
    n = x0.shape[0]
    has_lo, has_hi = jnp.isfinite(lower), jnp.isfinite(upper)
    lo, hi = jnp.where(has_lo, lower, 0.0), jnp.where(has_hi, upper, 0.0)
    # Push the start strictly inside the bounds (IPOPT's bound_push/bound_frac).
    gap = jnp.where(has_lo & has_hi, hi - lo, jnp.inf)
    push_lo = jnp.minimum(_PUSH * jnp.maximum(1.0, jnp.abs(lo)), _PUSH * gap)
    push_hi = jnp.minimum(_PUSH * jnp.maximum(1.0, jnp.abs(hi)), _PUSH * gap)
    x0 = jnp.where(has_lo, jnp.maximum(x0, lo + push_lo), x0)
    x0 = jnp.where(has_hi, jnp.minimum(x0, hi - push_hi), x0)

    def f(x):
        return objective(x, args)

    def c(x):
        return jnp.asarray(constraints(x, args), dtype).reshape(-1)

    m = jax.eval_shape(c, x0).shape[0]

    def slacks(x):
        # Distances to the bounds; 1 where there is no bound (masked out).
        return jnp.where(has_lo, x - lo, 1.0), jnp.where(has_hi, hi - x, 1.0)

    def barrier_of(x, fx, mu):
        s_lo, s_hi = slacks(x)
        logs = jnp.sum(jnp.where(has_lo, jnp.log(s_lo), 0.0)) + jnp.sum(
            jnp.where(has_hi, jnp.log(s_hi), 0.0)
        )
        return fx - mu * logs

    def errors(x, lam, z_lo, z_hi, grad, jac, cx, mu):
        """The optimality error of the barrier problem (mu) and its parts."""
        s_lo, s_hi = slacks(x)
        dual = grad + jac.T @ lam - z_lo + z_hi
        total = jnp.sum(jnp.abs(lam)) + jnp.sum(z_lo) + jnp.sum(z_hi)
        s_d = jnp.maximum(_S_MAX, total / max(n + m, 1)) / _S_MAX
        s_c = jnp.maximum(_S_MAX, (jnp.sum(z_lo) + jnp.sum(z_hi)) / max(n, 1)) / _S_MAX
        compl = jnp.maximum(
            jnp.max(jnp.where(has_lo, jnp.abs(z_lo * s_lo - mu), 0.0), initial=0.0),
            jnp.max(jnp.where(has_hi, jnp.abs(z_hi * s_hi - mu), 0.0), initial=0.0),
        )
        violation = jnp.max(jnp.abs(cx), initial=0.0)
        error = jnp.maximum(
            jnp.max(jnp.abs(dual), initial=0.0) / s_d,
            jnp.maximum(violation, compl / s_c),
        )
        return error, violation

    def fraction_to_boundary(v, dv, tau):
        # The largest alpha in (0, 1] with v + alpha dv >= (1 - tau) v, v > 0.
        ratio = jnp.where(dv < 0, -tau * v / jnp.where(dv < 0, dv, -1.0), jnp.inf)
        return jnp.minimum(1.0, jnp.min(ratio, initial=jnp.inf))

    elimination = (
        eliminate if isinstance(eliminate, Elimination) else Elimination(eliminate)
    )
    e = elimination.size
    nv, mr = n - e, m - e  # the unknowns and constraints the KKT matrix keeps

    def condense(w, sigma, jac):
        """The Newton system on the n - e unknowns that stay (W = w +
        diag(sigma)). The first e constraints give the eliminated step as
        dy = T dv - Jy^-1 c_e; with P = [T; I], the KKT matrix keeps P^T W P and
        J_rest P, and its inertia is that of the full matrix less (e, e)."""
        if e == 0:
            return None, w.dense() + jnp.diag(sigma), jnp.eye(n, dtype=dtype), jac
        t = -elimination.solve(jac, jac[:e, e:])
        p = jnp.concatenate([t, jnp.eye(nv, dtype=dtype)])
        w_r = w.sandwich(p) + (p.T * sigma) @ p
        return p, w_r, p.T @ p, jac[e:] @ p

    def kkt_matrix(condensed, delta_w, delta_c):
        _, w_r, metric, jac_r = condensed
        return jnp.block(
            [
                [w_r + delta_w * metric, jac_r.T],
                [jac_r, -delta_c * jnp.eye(mr, dtype=dtype)],
            ]
        )

    def correct_inertia(condensed, delta_last, mu):
        """The smallest regularization delta_w (from IPOPT's sequence) for which
        the KKT matrix has n positive and m negative eigenvalues: the step is
        then a descent direction of the merit function."""
        delta_c = jnp.where(mr > 0, 1e-8 * mu**0.25, 0.0)
        _, w_r, metric, jac_r = condensed

        # Zero, to round-off of the unregularized matrix: a threshold that does
        # not grow with delta_w (which would hide the -delta_c of dependent
        # constraints among the zeros).
        round_off = 1e-14 * (
            jnp.max(jnp.abs(w_r), initial=0.0)
            + jnp.max(jnp.abs(jac_r), initial=0.0)
            + 1
        )

        if nv + mr <= _EIGEN_UP_TO:

            def inertia_ok(delta):
                eig = _eigvalsh(kkt_matrix(condensed, delta, delta_c))
                positive = jnp.sum(eig > round_off)
                negative = jnp.sum(eig < -round_off)
                return (positive == nv) & (negative == mr)

        else:
            # A large matrix (the whole KKT matrix, condense=False): the same
            # test by a Cholesky factorization instead of all the eigenvalues
            # (10x cheaper at 1265 rows). The lower-right block -delta_c I has
            # mr negative eigenvalues, so by Haynsworth's inertia additivity
            # the KKT matrix has nv positive and mr negative ones if and only
            # if its Schur complement W + delta_w M + J^T J / delta_c is
            # positive definite (dependent rows of J included). The 1 /
            # delta_c scale costs digits: curvature below ~1e-16 |J|^2 /
            # delta_c is not resolved. Unlike the eigenvalues it does not
            # reject a matrix made nearly singular by nearly dependent rows of
            # J while the reduced Hessian is positive definite; on the double
            # pendulum on a cart it picks the delta_w of a null-space test
            # Z^T (W + delta_w M) Z > 0 at every iteration (docs/optimisation.md
            # section 3).
            schur = w_r
            if mr > 0:
                schur = schur + jac_r.T @ jac_r / delta_c

            def inertia_ok(delta):
                pivots = jnp.diagonal(_cholesky(schur + delta * metric))
                return jnp.all(jnp.isfinite(pivots)) & jnp.all(pivots**2 > round_off)

        def cond(state):
            delta, ok, tries = state
            return ~ok & (tries < 60)

        def body(state):
            delta, _, tries = state
            delta = jnp.where(
                delta == 0,
                jnp.where(delta_last == 0, 1e-4, jnp.maximum(1e-20, delta_last / 3)),
                delta * jnp.where(delta_last == 0, 100.0, 8.0),
            )
            return delta, inertia_ok(delta), tries + 1

        zero = jnp.zeros((), dtype)
        delta, ok, _ = jax.lax.while_loop(cond, body, (zero, inertia_ok(zero), 0))
        return delta, delta_c, ok

    def factorize(condensed, w, sigma, jac, delta_w, delta_c):
        """solve(g, c) -> (dx, lam) of [W + delta_w I, J^T; J, -delta_c I]
        [dx; lam] = -[g; c] (delta_c on the constraints kept), one factorization
        for the step and its second-order correction."""
        p = condensed[0]
        lu = _lu_factor(kkt_matrix(condensed, delta_w, delta_c))

        def solve(g, cv):
            if e == 0:
                sol = _lu_solve(*lu, -jnp.concatenate([g, cv]))
                return sol[:n], sol[n:]

            def h(v):
                return w.mv(v) + (sigma + delta_w) * v

            p0 = jnp.concatenate(
                [-elimination.solve(jac, cv[:e]), jnp.zeros(nv, dtype)]
            )
            rhs = jnp.concatenate([p.T @ (g + h(p0)), cv[e:] + jac[e:] @ p0])
            sol = _lu_solve(*lu, -rhs)
            dx = p @ sol[:nv] + p0
            lam_rest = sol[nv:]
            # The eliminated constraints' multipliers, from the stationarity
            # rows of the eliminated unknowns: Jy^T lam_e = -(H dx + g + ...)_y.
            lam_e = -elimination.solve(
                jac, (h(dx) + g)[:e] + jac[e:, :e].T @ lam_rest, transpose=True
            )
            return dx, jnp.concatenate([lam_e, lam_rest])

        return solve

    def step(state):
        (k, x, (cx, fx), lam, z_lo, z_hi, mu, filters, delta_last, alpha_last,
         *_) = state  # fmt: skip
        filter_theta, filter_phi, filled, theta0 = filters
        grad = jax.grad(f)(x)
        jac = jnp.asarray(jacobian(x, args), dtype).reshape(m, n)
        # Iteration k starts by testing x_k; the step from a converged point is
        # computed (inside a compiled loop) but not taken.
        error, violation = errors(x, lam, z_lo, z_hi, grad, jac, cx, 0.0)
        done = error <= tol
        stop = done | (k >= max_steps)
        if progress is not None:
            jax.debug.callback(
                progress, k, fx, violation, error, mu, alpha_last, delta_last
            )
        # The barrier subproblem solved well enough: a smaller barrier.
        err_mu, _ = errors(x, lam, z_lo, z_hi, grad, jac, cx, mu)
        smaller = jnp.maximum(tol / 10, jnp.minimum(_KAPPA_MU * mu, mu**_THETA_MU))
        mu_new = jnp.where(err_mu <= _KAPPA_EPS * mu, smaller, mu)
        tau = jnp.maximum(_TAU_MIN, 1 - mu_new)
        s_lo, s_hi = slacks(x)
        sigma = jnp.where(has_lo, z_lo / s_lo, 0.0) + jnp.where(
            has_hi, z_hi / s_hi, 0.0
        )
        grad_barrier = (
            grad
            - jnp.where(has_lo, mu_new / s_lo, 0.0)
            + jnp.where(has_hi, mu_new / s_hi, 0.0)
        )
        w = hessian(x, lam, args)
        if not isinstance(w, AbstractHessian):
            w = _Dense(jnp.asarray(w, dtype).reshape(n, n))
        condensed = condense(w, sigma, jac)
        delta_w, delta_c, inertia = correct_inertia(condensed, delta_last, mu_new)
        solve = factorize(condensed, w, sigma, jac, delta_w, delta_c)
        dx, lam_new = solve(grad_barrier, cx)
        dz_lo = jnp.where(has_lo, mu_new / s_lo - z_lo - z_lo / s_lo * dx, 0.0)
        dz_hi = jnp.where(has_hi, mu_new / s_hi - z_hi + z_hi / s_hi * dx, 0.0)

        def max_step(direction):
            """The fraction to the boundary of a step of the unknowns."""
            return jnp.minimum(
                fraction_to_boundary(s_lo, jnp.where(has_lo, direction, 0.0), tau),
                fraction_to_boundary(s_hi, jnp.where(has_hi, -direction, 0.0), tau),
            )

        alpha_max = max_step(dx)
        alpha_z = jnp.minimum(
            fraction_to_boundary(jnp.where(has_lo, z_lo, 1.0), dz_lo, tau),
            fraction_to_boundary(jnp.where(has_hi, z_hi, 1.0), dz_hi, tau),
        )
        # IPOPT's filter line search (Wachter & Biegler 2006, section 2 and
        # algorithm A): a trial point is accepted if no filter entry dominates it
        # and it reduces the violation theta = |c|_1 or the barrier function phi
        # enough; where theta is small and dx a descent direction of phi, phi
        # must decrease by Armijo instead. Second-order corrections when the
        # first trial is rejected for its violation (against the Maratos effect).
        theta, phi = jnp.sum(jnp.abs(cx)), barrier_of(x, fx, mu_new)
        theta0 = jnp.where(k == 0, theta, theta0)
        theta_max = 1e4 * jnp.maximum(1.0, theta0)
        theta_min = 1e-4 * jnp.maximum(1.0, theta0)
        # A new barrier parameter starts a new filter, holding only theta_max.
        reset = (mu_new != mu) | (k == 0)
        empty = jnp.full(_FILTER, jnp.inf, dtype)
        filter_theta = jnp.where(reset, empty.at[0].set(theta_max), filter_theta)
        filter_phi = jnp.where(reset, empty.at[0].set(-jnp.inf), filter_phi)
        filled = jnp.where(reset, 1, filled)
        slope = grad_barrier @ dx

        def test(trial, c_t, f_t, alpha, phase):
            theta_t = jnp.sum(jnp.abs(c_t))
            phi_t = barrier_of(trial, f_t, mu_new)
            finite = jnp.isfinite(theta_t) & jnp.isfinite(phi_t)
            dominated = jnp.any((theta_t >= filter_theta) & (phi_t >= filter_phi))
            switching = (
                (theta <= theta_min)
                & (slope < 0)
                & (alpha * (-slope) ** _S_PHI > theta**_S_THETA)
            )
            armijo = phi_t <= phi + _ETA_PHI * alpha * slope
            enough = (theta_t <= (1 - _GAMMA_THETA) * theta) | (
                phi_t <= phi - _GAMMA_PHI * theta
            )
            ok = finite & ~dominated & jnp.where(switching, armijo, enough)
            # Restoration (phase 3): the violation alone must fall.
            restored = finite & (theta_t <= (1 - _GAMMA_THETA) * theta)
            ok = jnp.where(phase == 3, restored, ok)
            return ok, switching & armijo & (phase != 3), theta_t

        # The trials, in one loop so that the constraints (a simulation, for
        # optimal control) are compiled once: x + alpha_max dx first; if it is
        # rejected for its violation, up to _MAX_SOC second-order corrections
        # (the step again, with the constraints at the trial points added to the
        # right-hand side, against the Maratos effect); then backtracking on dx.
        # Where that fails too (the step has shrunk _RESTORE_AFTER times), a short
        # feasibility restoration instead of IPOPT's restoration phase:
        # backtracking on the least-norm step to the linearized constraints
        # (`feasibility_step`), accepted once the violation falls; the filter
        # then starts again from the point left.
        def feasibility_step():
            """The least-norm step to the linearized constraints, min 1/2
            dx^T (Sigma + I) dx s.t. J dx = -c (the Hessian left out, the
            barrier kept, as in IPOPT's restoration phase): where the
            Newton step is huge (the Hessian nearly singular on the
            linearized constraints), the violation falls only over a
            vanishing step along it, and this one is the shortest."""
            zero = _Zero(n, dtype)
            reduced = condense(zero, sigma, jac)
            return factorize(reduced, zero, sigma, jac, 1.0, delta_c)(
                jnp.zeros_like(grad_barrier), cx
            )[0]

        def search_cond(search):
            return ~search[2] & (search[4] < _MAX_BACKTRACKS + 2)

        def search_body(search):
            alpha, phase, _, _, tries, step_x, _, _, (c_soc, theta_last), feas = search
            trial = x + step_x
            c_t, f_t = c(trial), f(trial)
            ok, f_type, theta_t = test(trial, c_t, f_t, alpha, phase)
            # What to try next if this one fails: after the first trial, up to
            # _MAX_SOC second-order corrections while each lowers the
            # violation by _KAPPA_SOC (IPOPT's max_soc and kappa_soc), the
            # constraints of each trial added to the right-hand side.
            soc_next = ((phase == 0) & (theta_t >= theta)) | (
                (phase == 1) & (tries < _MAX_SOC) & (theta_t <= _KAPPA_SOC * theta_last)
            )
            c_soc = jnp.where(
                phase == 0,
                alpha_max * cx + c_t,
                jnp.where(phase == 1, alpha * c_soc + c_t, c_soc),
            )
            restore_next = (phase == 2) & (tries >= _RESTORE_AFTER)

            # A solve only where the next trial needs a new direction: the
            # second-order correction, or on entering the restoration the
            # feasibility step.
            def new_direction():
                return jax.lax.cond(
                    soc_next,
                    lambda: solve(grad_barrier, c_soc)[0],
                    feasibility_step,
                )

            fresh = jax.lax.cond(
                ~ok & (soc_next | restore_next),
                new_direction,
                lambda: jnp.zeros_like(dx),
            )
            alpha_fresh = max_step(fresh)
            feas = jnp.where(restore_next, fresh, feas)
            restore = (phase == 3) | restore_next
            back_alpha = jnp.where(phase == 2, alpha / 2, alpha_max / 2)
            back_alpha = jnp.where(
                phase == 3,
                alpha / 2,
                jnp.where(restore_next, alpha_fresh, back_alpha),
            )
            next_alpha = jnp.where(soc_next, alpha_fresh, back_alpha)
            next_step = jnp.where(
                soc_next,
                alpha_fresh * fresh,
                back_alpha * jnp.where(restore, feas, dx),
            )
            next_phase = jnp.where(soc_next, 1, jnp.where(restore, 3, 2))
            return (
                jnp.where(ok, alpha, next_alpha),
                jnp.where(ok, phase, next_phase),
                ok,
                f_type,
                tries + 1,
                jnp.where(ok, step_x, next_step),
                (c_t, f_t),
                ok,
                (c_soc, theta_t),
                feas,
            )

        no = jnp.array(False)
        first = (alpha_max, jnp.array(0), no, no, jnp.array(0), alpha_max * dx,
                 (cx, fx), no, (cx, theta), jnp.zeros_like(dx))  # fmt: skip
        alpha, phase, accepted, f_type, _, step_x, (c_new, f_new), *_ = (
            jax.lax.while_loop(search_cond, search_body, first)
        )
        restored = accepted & (phase == 3)
        filter_theta = jnp.where(restored, empty.at[0].set(theta_max), filter_theta)
        filter_phi = jnp.where(restored, empty.at[0].set(-jnp.inf), filter_phi)
        filled = jnp.where(restored, 1, filled)
        # Not an f-type iteration: the filter grows by the current point.
        grow = accepted & ~f_type
        slot = jnp.minimum(filled, _FILTER - 1)
        filter_theta = jnp.where(
            grow, filter_theta.at[slot].set((1 - _GAMMA_THETA) * theta), filter_theta
        )
        filter_phi = jnp.where(
            grow, filter_phi.at[slot].set(phi - _GAMMA_PHI * theta), filter_phi
        )
        filled = jnp.where(grow, jnp.minimum(filled + 1, _FILTER - 1), filled)
        x_new = x + step_x
        # A restoration step leaves the multipliers as they were.
        alpha_dual = jnp.where(restored, 0.0, alpha)
        lam_next = lam + alpha_dual * (lam_new - lam)
        alpha_z = jnp.where(restored, 0.0, alpha_z)
        z_lo_new = z_lo + alpha_z * dz_lo
        z_hi_new = z_hi + alpha_z * dz_hi
        # Keep the bound multipliers near mu / slack (IPOPT's kappa_sigma).
        s_lo, s_hi = slacks(x_new)
        z_lo_new = jnp.where(
            has_lo,
            jnp.clip(
                z_lo_new, mu_new / (_KAPPA_SIGMA * s_lo), _KAPPA_SIGMA * mu_new / s_lo
            ),
            0.0,
        )
        z_hi_new = jnp.where(
            has_hi,
            jnp.clip(
                z_hi_new, mu_new / (_KAPPA_SIGMA * s_hi), _KAPPA_SIGMA * mu_new / s_hi
            ),
            0.0,
        )
        filters_new = (filter_theta, filter_phi, filled, theta0)
        new = (k + 1, x_new, (c_new, f_new), lam_next, z_lo_new, z_hi_new, mu_new,
               filters_new, delta_w, alpha)  # fmt: skip
        old = (k, x, (cx, fx), lam, z_lo, z_hi, mu, filters, delta_last, alpha_last)
        failed = ~stop & (~accepted | ~inertia)
        take = ~stop & ~failed
        kept = jax.tree.map(lambda a, b: jnp.where(take, a, b), new, old)
        return (*kept, error, violation, done, stop | failed, failed)

    def cond(state):
        return ~state[13]  # stopped

    zero = jnp.zeros((), dtype)
    z0 = (
        jnp.where(has_lo, 1.0, 0.0).astype(dtype),
        jnp.where(has_hi, 1.0, 0.0).astype(dtype),
    )
    inf = jnp.asarray(jnp.inf, dtype)
    init = (
        jnp.array(0), x0, (c(x0), f(x0)), jnp.zeros(m, dtype), *z0,
        jnp.asarray(_MU0, dtype),
        # The filter (set up at k = 0 from the first violation) and theta(x0).
        (jnp.full(_FILTER, jnp.inf, dtype), jnp.full(_FILTER, jnp.inf, dtype),
         jnp.array(1), inf),
        zero, zero, inf, inf, jnp.array(False), jnp.array(False), jnp.array(False),
    )  # fmt: skip
    # Each iteration first tests its point: the loop ends on the iteration that
    # finds x converged (or at max_steps, or unable to step), with the error and
    # violation of the final x.
    state = jax.lax.while_loop(cond, step, init)
    k, x, (_, fx), lam, z_lo, z_hi, *_, error, violation, done, _, failed = state
    return NLPSolution(x, lam, z_lo, z_hi, fx, violation, error, k, done, failed)
