"""Multiple shooting for `fit`: constrained Gauss-Newton over segments.

The horizon is cut into K segments at saved times. The start states of segments
1..K-1 (the nodes) become unknowns beside the parameters; continuity (each node
equals the end of the segment before it) is held by equality constraints; every
segment is simulated at once under `vmap`. Each iteration solves

    min |r + J dx|^2 + mu |D dx|^2   s.t.   c + C dx = 0

as one KKT system (Levenberg-Marquardt damping mu with Marquardt's scaling D),
followed by a backtracking line search on the exact l1 merit
|r|^2 / 2 + nu |c|_1 (Nocedal & Wright 2006, sections 15.5 and 18.3). This is the
method of Bock (1987) for parameter estimation in ODEs; the point of it is that
the nodes can start on the data, so that a chaotic or long horizon, where the
single-shooting residual is too nonlinear in the parameters, still converges.
Nodes started on the data are first fitted with the segments decoupled (no
continuity), the parameters with them; then the nodes restart from the data and
continuity is imposed (docs/optimisation.md, section 2).

Jacobians are per segment, by forward mode in the segment's own unknowns (its
start state and the parameters), vectorized over segments; the sparse
block structure of the whole is never differentiated as one function.

References: H. G. Bock, "Randwertproblemmethoden zur Parameteridentifizierung in
Systemen nichtlinearer Differentialgleichungen", Bonner Mathematische Schriften
183 (1987); H. G. Bock and K. J. Plitt, "A multiple shooting algorithm for direct
solution of optimal control problems", IFAC 1984.
"""

import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from .._results import is_failure
from .._simulate import simulate
from .._trajectory import Trajectory
from ._least_squares import _BAD_START, _RUNNING, report, residual_vector, started


_FIELDS = ("q", "qd", "qdd", "multipliers", "phi", "phi_dot", "energy")
# simulate's arguments that shooting sets per segment.
_OWN = ("t0", "t1", "ts", "initial_tol", "project_initial")


def segment_layout(num_times: int, segments: int):
    """Which saved times each segment covers, and where each saved time is found.

    Segment k runs from ts[b_k] to ts[b_(k+1)] (b: K + 1 boundaries as even as
    the sample count allows) and saves those rows, padded to a common length by
    repeating its end. Saved time i is read from the segment it starts or lies
    in (a node's data from the node), the last one from the last segment's end.
    Returns rows (K, L) into ts, and segment_of, local (T,).
    """
    if not 2 <= segments <= num_times - 1:
        raise ValueError(
            f"fit: segments={segments} needs 2 <= segments <= len(ts) - 1 = "
            f"{num_times - 1} (each segment spans at least one interval of ts)."
        )
    bounds = np.round(np.linspace(0, num_times - 1, segments + 1)).astype(int)
    length = int(np.max(np.diff(bounds))) + 1
    rows = np.minimum(bounds[:-1, None] + np.arange(length), bounds[1:, None])
    index = np.arange(num_times)
    segment_of = np.minimum(
        np.searchsorted(bounds, index, side="right") - 1, segments - 1
    )
    return rows, segment_of, index - bounds[segment_of]


class Shooting(eqx.Module):
    """A fit problem (`_fit._Problem`) cut into segments: unknowns (z, nodes) ->
    residuals, continuity constraints and their Jacobians."""

    problem: eqx.Module
    seg_ts: Array  # (K, L) saved times of each segment
    t_start: Array  # (K,) start time of each segment
    segment_of: Array  # (T,) the segment each saved time is read from
    local: Array  # (T,) its row there

    @property
    def shape(self):
        """(E, K): experiments (1 without), segments."""
        e = self.problem.experiments
        return (1 if e is None else e), self.seg_ts.shape[0]

    def start(self, p):
        """The first node, (E, 2n), from the problem's initial state."""
        q0, qd0 = self.problem.start(p)
        s0 = jnp.concatenate([q0, qd0], axis=-1)
        return s0 if self.problem.experiments is not None else s0[None]

    def _segment(self, unravel, zf, s, t_start, seg_ts):
        problem = self.problem
        p = problem.from_free(unravel(zf))
        n = s.shape[-1] // 2
        kwargs = {k: v for k, v in problem.simulate_kwargs.items() if k not in _OWN}
        # Nodes off the constraint manifold are allowed during the iteration (the
        # projection after every step brings the segment onto it, and continuity
        # with the projected end puts the node there at the solution).
        traj = simulate(
            problem.system, s[:n], s[n:], p, t0=t_start, t1=seg_ts[-1], ts=seg_ts,
            initial_tol=float("inf"), **kwargs,
        )  # fmt: skip
        fields = tuple(getattr(traj, name) for name in _FIELDS)
        return fields, (fields, traj.stats, traj.result)

    def _residuals(self, unravel, zf, fields, stats, result):
        """Residuals of the stitched trajectory (fields (E, T, ...))."""
        problem = self.problem
        p = problem.from_free(unravel(zf))

        def observe(fields, stats, result):
            traj = Trajectory(problem.ts, *fields, stats, result)
            return problem.observe(traj, p)

        if problem.experiments is None:
            one = jax.tree.map(lambda x: x[0], (fields, stats, result))
            prediction = observe(*one)
        else:
            prediction = jax.vmap(observe)(fields, stats, result)
        return residual_vector(prediction, problem.data, problem.sigma)

    def stitch(self, x):
        """Per-segment rows (E, K, L, ...) -> per saved time (E, T, ...)."""
        return x[:, self.segment_of, self.local]

    def evaluate(self, unravel, zf, nodes):
        """At free parameters zf (P,) and nodes (E, K - 1, 2n): residuals r (N,),
        their Jacobian (N, P + M), continuity c (M,), its Jacobian C (M, P + M),
        and whether everything could be evaluated."""
        e, k = self.shape

        def start(zf):
            s0 = self.start(self.problem.from_free(unravel(zf)))
            return s0, s0

        ds0, s0 = jax.jacfwd(start, has_aux=True)(zf)  # (E, 2n, P), (E, 2n)
        s_all = jnp.concatenate([s0[:, None], nodes], axis=1)  # (E, K, 2n)
        segment = jax.jacfwd(
            functools.partial(self._segment, unravel), argnums=(0, 1), has_aux=True
        )
        per = jax.vmap(jax.vmap(segment, (None, 0, 0, 0)), (None, 0, None, None))
        jacobians, (fields, stats, result) = per(zf, s_all, self.t_start, self.seg_ts)
        jz, js = (tuple(j[i] for j in jacobians) for i in (0, 1))
        # The first node depends on the parameters through the initial state.
        jz = tuple(
            a.at[:, 0].add(jnp.einsum("e...i,eij->e...j", b[:, 0], ds0))
            for a, b in zip(jz, js, strict=True)
        )
        failed = is_failure(result)
        # Per experiment, the first segment that failed (else the first one's).
        first = jnp.argmax(failed, axis=1)
        result = jax.tree.map(lambda v: v[jnp.arange(e), first], result)
        stats = {
            key: jnp.max(v, axis=1) if key == "max_steps" else jnp.sum(v, axis=1)
            for key, v in stats.items()
        }
        full = tuple(self.stitch(x) for x in fields)
        residuals = functools.partial(self._residuals, unravel)
        r, linear = jax.linearize(
            lambda zf, full: residuals(zf, full, stats, result), zf, full
        )
        num_p = zf.shape[0]
        jac_p = jax.vmap(linear, in_axes=(0, -1))(
            jnp.eye(num_p, dtype=zf.dtype), tuple(self.stitch(x) for x in jz)
        )
        js_full = tuple(self.stitch(x) for x in js)  # (E, T, ..., 2n)
        width = nodes.shape[-1]
        which = np.indices((e, k - 1, width)).reshape(3, -1)

        def node_column(experiment, node, i):
            # The rows read from segment node + 1 of this experiment.
            rows = (jnp.arange(e)[:, None] == experiment) & (
                self.segment_of[None, :] == node + 1
            )
            tangent = tuple(
                jnp.where(rows.reshape(rows.shape + (1,) * (x.ndim - 3)), x[..., i], 0)
                for x in js_full
            )
            return linear(jnp.zeros_like(zf), tangent)

        jac_nodes = jax.vmap(node_column)(*(jnp.asarray(w) for w in which))
        jac = jnp.concatenate([jac_p.T, jac_nodes.T], axis=1)
        # Continuity: node k + 1 minus the (projected) end of segment k.
        end = jnp.concatenate([fields[0][:, :, -1], fields[1][:, :, -1]], axis=-1)
        end_z = jnp.concatenate([jz[0][:, :, -1], jz[1][:, :, -1]], axis=-2)
        end_s = jnp.concatenate([js[0][:, :, -1], js[1][:, :, -1]], axis=-2)
        c = (nodes - end[:, :-1]).reshape(-1)
        m = c.shape[0]
        # d c_k / d node_j: I where j = k, -d end_k / d s_k where j = k - 1.
        shift = jnp.eye(k - 1, k=-1, dtype=zf.dtype)
        sub = jnp.einsum(
            "ef,kl,ekab->ekaflb", jnp.eye(e, dtype=zf.dtype), shift, end_s[:, :-1]
        ).reshape(m, m)
        con_jac = jnp.concatenate(
            [-end_z[:, :-1].reshape(m, num_p), jnp.eye(m, dtype=zf.dtype) - sub], axis=1
        )
        ok = (
            ~jnp.any(failed)
            & jnp.all(jnp.isfinite(s0))
            & jnp.all(jnp.isfinite(r))
            & jnp.all(jnp.isfinite(jac))
            & jnp.all(jnp.isfinite(c))
            & jnp.all(jnp.isfinite(con_jac))
        )
        return r, jac, c, con_jac, ok


_LINE_SEARCH = -3  # beside least_squares' codes
_DECOUPLED_STEPS = 50  # at most, before continuity is imposed


def solve(
    shooting, z0, nodes0, *, decouple, max_steps, rtol, atol, progress, print_every
):
    """Constrained Gauss-Newton from (z0, nodes0); with `decouple`, first
    Gauss-Newton on the parameters and nodes without continuity, then the nodes
    back to nodes0 and on with continuity. Returns, as `least_squares` does,
    (z, loss history, steps, whether the step test was met, message) with the
    violation of continuity added, and the residuals and their Jacobian in the
    parameters at z (the nodes following them along continuity)."""
    started[0] = time.perf_counter()
    out = _solve(
        shooting, z0, nodes0, decouple, max_steps, rtol, atol,
        print_every if progress else 0,
    )  # fmt: skip
    x, history, steps, terminated, code, r, jac, c, con_jac = out
    zf0, unravel = ravel_pytree(z0)
    num_p = zf0.shape[0]
    x = np.asarray(x)
    z = unravel(jnp.asarray(x[:num_p]))
    code = int(code)
    violation = float(np.max(np.abs(np.asarray(c)), initial=0.0))
    if bool(terminated):
        message = (
            "converged: the last step was below atol + rtol |z| and continuity "
            f"holds to {violation:.1e}"
        )
    elif code == _BAD_START:
        message = (
            "the model cannot be evaluated at the starting parameters and nodes "
            "(non-finite residuals: the initial state or a segment's simulation "
            "failed there)"
        )
    elif code == _LINE_SEARCH:
        message = (
            "the line search failed: no step along the Gauss-Newton direction "
            "decreases the merit function (a non-smooth model, or a simulation "
            "less accurate than rtol and atol ask: tighten its tolerances)"
        )
    else:
        message = f"max_steps = {max_steps} reached"
    jac_z = reduced_jacobian(np.asarray(jac), np.asarray(con_jac), num_p)
    out = z, np.asarray(history), int(steps), bool(terminated), message, violation
    return out, (np.asarray(r), jac_z)


@eqx.filter_jit
def _solve(shooting, z0, nodes0, decouple, max_steps, rtol, atol, every):
    zf0, unravel = ravel_pytree(z0)
    num_p = zf0.shape[0]
    x0 = jnp.concatenate([zf0, nodes0.reshape(-1)])

    def evaluate(x):
        nodes = x[num_p:].reshape(nodes0.shape)
        return shooting.evaluate(unravel, x[:num_p], nodes)

    struct = jax.eval_shape(evaluate, x0)
    r, jac, c, con_jac, _ = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), struct)
    dtype = x0.dtype
    size, m = x0.shape[0], c.shape[0]
    zero = jnp.zeros((), dtype)

    def direction(r, jac, c, con_jac, mu, scale, coupled):
        # The damped Gauss-Newton step, in variables scaled by D: with the
        # linearized continuity as constraints, or (decoupled) without them.
        a = jac / scale
        b = jnp.where(coupled, con_jac / scale, 0)
        hessian = a.T @ a + mu * jnp.eye(size, dtype=dtype)
        corner = jnp.where(coupled, 0, -jnp.eye(m, dtype=dtype))
        kkt = jnp.block([[hessian, b.T], [b, corner]])
        rhs = -jnp.concatenate([a.T @ r, jnp.where(coupled, c, 0)])
        sol = jnp.linalg.solve(kkt, rhs)
        return sol[:size] / scale, sol[size:]

    def cond(carry):
        step, terminate, code = carry[0], carry[-2], carry[-1]
        return ~terminate & (code == _RUNNING) & (step < max_steps)

    def body(carry):
        (step, coupled, force, x, at_x, dx, alpha, slope, mu, nu, scale, history,
         _, code) = carry  # fmt: skip
        r, jac, c, con_jac = at_x
        trial = x + alpha * dx
        r_t, jac_t, c_t, con_jac_t, ok = evaluate(trial)
        # The exact l1 merit |r|^2 / 2 + nu |c|_1 (Nocedal & Wright 18.3);
        # decoupled, |r|^2 / 2 alone (nu = 0).
        merit = 0.5 * jnp.sum(r**2) + nu * jnp.sum(jnp.abs(c))
        merit_t = 0.5 * jnp.sum(r_t**2) + nu * jnp.sum(jnp.abs(c_t))
        # Armijo along dx; a forced trial (the start, the restart on the
        # nodes' guess) is taken as it is.
        accept = ok & (force | (merit_t <= merit + 1e-4 * alpha * slope))
        code = jnp.where(force & ~ok, _BAD_START, code)
        full = alpha == 1
        mu_new = jnp.where(force, mu, jnp.where(full, mu / 3, mu * 4))
        mu_new = jnp.clip(mu_new, 1e-12, 1e12)
        scale_new = jnp.maximum(
            scale, jnp.sqrt(jnp.sum(jac_t**2, 0) + jnp.sum(con_jac_t**2, 0))
        )
        scale_new = jnp.where(jnp.isfinite(scale_new), scale_new, scale)
        dx_new, lam = direction(r_t, jac_t, c_t, con_jac_t, mu_new, scale_new, coupled)
        nu_new = jnp.where(
            coupled, jnp.maximum(nu, 2 * jnp.max(jnp.abs(lam), initial=0.0)), 0
        )
        slope_new = (jac_t.T @ r_t) @ dx_new - nu_new * jnp.sum(jnp.abs(c_t))
        # Rejected: a shorter step along the same direction, by quadratic
        # interpolation of the merit, kept within [0.1, 0.5] alpha.
        shorter = -slope * alpha**2 / (2 * (merit_t - merit - alpha * slope))
        shorter = jnp.where(jnp.isfinite(shorter), shorter, 0.1 * alpha)
        alpha_rejected = jnp.clip(shorter, 0.1 * alpha, 0.5 * alpha)
        change = jnp.max(jnp.abs(trial - x))
        tol = atol + rtol * jnp.max(jnp.abs(trial))
        violation = jnp.max(jnp.abs(c_t), initial=zero)
        # MINPACK's step test on a full step, or the next Gauss-Newton step
        # already within it (near the optimum the merit stops resolving steps
        # the simulation's error is as large as, and Armijo would reject them).
        settled = (full & (change <= tol)) | (jnp.max(jnp.abs(dx_new)) <= tol)
        terminate = coupled & accept & ~force & settled & (violation <= tol)
        code = jnp.where(
            coupled & ~accept & ~force & (alpha_rejected < 1e-10), _LINE_SEARCH, code
        )
        # The decoupled phase ends once the parameters settle to a thousandth
        # (or its line search stalls: a node lost in a local minimum of its own
        # segment); then the nodes restart from their guess, and continuity is
        # imposed.
        z_change = jnp.max(jnp.abs(trial[:num_p] - x[:num_p]))
        z_size = jnp.max(jnp.abs(trial[:num_p]))
        end_decoupled = ~coupled & (
            (accept & ~force & full & (z_change <= 1e-3 * (1 + z_size)))
            | (~accept & ~force & (alpha_rejected < 1e-3))
            | (step >= _DECOUPLED_STEPS)
        )

        def pick(flag, new, old):
            return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)

        x, at_x, dx, slope, mu, nu, scale = pick(
            accept,
            (trial, (r_t, jac_t, c_t, con_jac_t), dx_new, slope_new, mu_new, nu_new,
             scale_new),
            (x, at_x, dx, slope, mu, nu, scale),
        )  # fmt: skip
        alpha = jnp.where(accept, 1.0, alpha_rejected).astype(dtype)
        restart = jnp.concatenate([x[:num_p], x0[num_p:]])
        dx = jnp.where(end_decoupled, restart - x, dx)
        alpha = jnp.where(end_decoupled, 1.0, alpha).astype(dtype)
        force = end_decoupled
        coupled = coupled | end_decoupled
        loss = jnp.sum(at_x[0] ** 2)
        history = jnp.where(step == 0, history.at[0].set(loss), history)
        history = history.at[step + 1].set(loss)
        if every:
            jax.debug.callback(
                report, step, loss, every, jnp.max(jnp.abs(at_x[2]), initial=zero)
            )
        return (step + 1, coupled, force, x, at_x, dx, alpha, slope, mu, nu, scale,
                history, terminate, code)  # fmt: skip

    init = (
        jnp.array(0), jnp.array(not decouple), jnp.array(True), x0,
        (r, jac, c, con_jac), jnp.zeros_like(x0), jnp.ones((), dtype), zero,
        jnp.asarray(1e-3, dtype), zero, jnp.full(size, 1e-12, dtype),
        jnp.full(max_steps + 1, jnp.nan, dtype), jnp.array(False),
        jnp.array(_RUNNING),
    )  # fmt: skip
    out = jax.lax.while_loop(cond, body, init)
    step, _, _, x, at_x, *_, history, terminate, code = out
    return (x, history, step, terminate & (code == _RUNNING), code, *at_x)


def reduced_jacobian(jac, con_jac, num_p):
    """The Jacobian of the residuals in the parameters alone, the nodes following
    them along the continuity constraints: J_z - J_S C_S^-1 C_z (the single
    shooting sensitivity, for the covariance)."""
    j_z, j_s = jac[:, :num_p], jac[:, num_p:]
    c_z, c_s = con_jac[:, :num_p], con_jac[:, num_p:]
    return j_z - j_s @ np.linalg.solve(c_s, c_z)


def make_shooting(problem, segments, params, states_guess):
    """The segmented problem and its starting nodes (E, K - 1, 2n): the states at
    the node times of `states_guess` (q, qd), each (T, n) or (E, T, n), or of a
    simulation at the starting parameters."""
    ts = problem.ts
    rows, segment_of, local = segment_layout(ts.shape[0], segments)
    t0 = problem.simulate_kwargs.get("t0", ts[0])
    seg_ts = ts[rows]
    shooting = Shooting(
        problem, seg_ts, seg_ts[:, 0].at[0].set(t0), jnp.asarray(segment_of),
        jnp.asarray(local),
    )  # fmt: skip
    e = problem.experiments
    if states_guess is None:
        kwargs = {k: v for k, v in problem.simulate_kwargs.items() if k != "adjoint"}
        q0, qd0 = problem.start(params)

        def run(q0, qd0):
            traj = simulate(problem.system, q0, qd0, params, t1=ts[-1], ts=ts, **kwargs)
            return traj.q, traj.qd

        q, qd = run(q0, qd0) if e is None else jax.vmap(run)(q0, qd0)
        source = "a simulation at the starting parameters"
    else:
        q, qd = (jnp.asarray(x) for x in states_guess)
        source = "states_guess"
        n = jax.eval_shape(problem.start, params)[0].shape[-1]
        want = (ts.shape[0], n)
        want = want if e is None else (e, *want)
        if q.shape != want or qd.shape != want:
            raise ValueError(
                f"fit: states_guess must be (q, qd), each of shape {want} (the "
                f"state at every time of ts); got {q.shape} and {qd.shape}."
            )
    states = jnp.concatenate([q, qd], axis=-1)
    nodes = states[..., rows[1:, 0], :]
    nodes = nodes if e is not None else nodes[None]
    if not bool(jnp.all(jnp.isfinite(nodes))):
        raise ValueError(
            f"fit: the starting nodes from {source} are not finite (the simulation "
            "failed before the end): pass states_guess=(q, qd), the states at the "
            "times ts estimated from the data."
        )
    return shooting, nodes
