"""Trajectory optimisation by direct multiple shooting: `optimize_controls`.

The horizon [t0, t1] is cut into K segments. The states at the segment
boundaries (the nodes, after the fixed initial state) and the control values in
`params` are the unknowns; every segment is simulated from its node with a few
fixed steps, all segments at once under `vmap`, and continuity (each node equals
the end of the segment before it), the terminal conditions and the path
inequalities are the constraints of a nonlinear program:

    min  cost(nodes, params)
    s.t. S_(k+1) - F_k(S_k, u) = 0,   terminal(S_K) = 0,
         path(t_k, S_k) + s_k = 0,  s_k >= 0,   lo <= u <= hi.

It is solved by the primal-dual interior-point method of IPOPT (`interior_point`,
Wachter & Biegler 2006) with exact second derivatives. Each segment depends on
its node and on the few control values that act inside it (found once by
probing the model's dependence on the controls), so its Jacobian and the Hessian
of its part of the Lagrangian are taken by forward mode in those few unknowns,
vectorized over segments. The node states are eliminated from every Newton step
(condensing): the KKT matrix that is factorized has the size of the controls.

References: H. G. Bock and K. J. Plitt, "A multiple shooting algorithm for
direct solution of optimal control problems", IFAC 1984; A. Wachter and L. T.
Biegler, Math. Program. 106 (2006); J. T. Betts, "Practical Methods for Optimal
Control Using Nonlinear Programming", SIAM 2010.
"""

import warnings
from collections.abc import Callable, Sequence

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree

from .._dynamics import VectorField
from .._inputs import _concrete
from .._mechanics import AbstractLagrangian
from .._results import RESULTS
from .._saddle import AbstractSaddleSolver, SchurCholesky
from .._simulate import default_stabilization, simulate
from .._stabilization import AbstractStabilization, NoStabilization
from .._system import System, function_name
from .._trajectory import Trajectory, evaluate_trajectory
from ._interior_point import AbstractHessian, Elimination, interior_point


class ControlResult(eqx.Module):
    """What [`lagrax.optimize_controls`][] found.

    **Fields:**

    - `params`: the parameters with the optimal control values.
    - `trajectory`: the optimal controls simulated from (q0, qd0) in one piece
        with adaptive steps (`rtol`, `atol` = 1e-10; jumps of the controls at
        the segment boundaries), saved at `ts` (default: the segment
        boundaries). This is what the controls do, not what the transcription
        assumed.
    - `nodes`: the NLP's states at the K + 1 segment boundaries, as a
        Trajectory (the states the cost saw).
    - `converged`: the KKT error is below `tol`.
    - `iterations`: interior-point (Newton) iterations.
    - `cost`: the cost at the solution.
    - `max_violation`: the largest violation of continuity, terminal and path
        constraints in the transcription.
    - `kkt_error`: IPOPT's scaled optimality error at the solution.
    - `terminal_error`: max |terminal(q, qd)| of `trajectory` at t1 (0 without
        terminal conditions): the transcription's integration error shows here.
    - `failed`: the line search or the inertia correction could not go on
        (see docs/optimisation.md section 3 for the usual causes).
    """

    params: PyTree
    trajectory: Trajectory
    nodes: Trajectory
    converged: Array
    iterations: Array
    cost: Array
    max_violation: Array
    kkt_error: Array
    terminal_error: Array
    failed: Array


def optimize_controls(
    system: System,
    params: PyTree,
    q0: ArrayLike,
    qd0: ArrayLike,
    *,
    t1: float,
    controls: str | Sequence[str] = "u",
    cost: Callable[[Trajectory, PyTree], Array] | None = None,
    terminal: Callable[[Array, Array, PyTree], Array] | None = None,
    bounds: dict | None = None,
    segments: int | None = None,
    path: Callable[[Array, Array, Array, PyTree], Array] | None = None,
    t0: float = 0.0,
    states_guess: tuple[ArrayLike, ArrayLike] | None = None,
    steps_per_segment: int = 2,
    solver: dfx.AbstractSolver | None = None,
    stabilization: AbstractStabilization | None = None,
    saddle_solver: AbstractSaddleSolver | None = None,
    ts: ArrayLike | None = None,
    condense: bool | None = None,
    tol: float = 1e-8,
    max_steps: int = 200,
    progress: bool | Callable = False,
) -> ControlResult:
    """Optimal controls by direct multiple shooting and an interior-point method.

        control = lx.PiecewiseConstant(0.0, 2.0, num_knots=50)
        # ... forces(t, q, qd, p) uses control(t, p["u"]) ...
        result = lx.optimize_controls(
            system, params, q0, qd0, t1=2.0, controls="u",
            cost=lambda traj, p: 0.04 * jnp.sum(p["u"] ** 2),
            terminal=lambda q, qd, p: jnp.stack([q[1] - q[0], qd[0], qd[1]]),
            bounds={"u": (-10.0, 10.0)}, segments=50,
        )

    **Arguments:**

    - `system`, `params`, `q0`, `qd0`: as for [`lagrax.simulate`][]; (q0, qd0) is
        the fixed initial state (consistent with the constraints).
    - `t1`, `t0`: the horizon.
    - `controls`: the key (or keys) of `params` that are optimised: arrays whose
        first axis runs over a control's knots ([`lagrax.PiecewiseConstant`][]
        with one value per segment is the usual choice;
        [`lagrax.PiecewiseLinear`][] and [`lagrax.CubicSpline`][] work too).
        Their values in `params` are the first guess.
    - `cost`: `cost(nodes, params) -> scalar`, minimised; `nodes` is a
        Trajectory at the K + 1 segment boundaries. Default: 0 (a feasibility
        problem).
    - `terminal`: `terminal(q, qd, params) -> (r,)`, held at 0 at t1. The
        conditions should be independent of each other and of the system's
        constraints there (at an upright pendulum, "height = l" is implied by
        the rod and "horizontal offset = 0"; give only the latter); dependent
        ones are handled by regularization, at some cost in iterations.
    - `bounds`: `{key: (lo, hi)}`, hard bounds on control values (scalars or
        arrays broadcast to the key's shape; +-inf for none).
    - `segments`: K, the number of shooting segments (default: one per knot of
        the first control).
    - `path`: `path(t, q, qd, params) -> (g,)`, held <= 0 at every segment
        boundary after t0.
    - `states_guess`: (q, qd) of shape (K + 1, n), the first guess of the states
        at the boundaries (e.g. a straight line from start to goal, or a previous
        result's `nodes`). Default: the first guess of the controls simulated.
    - `steps_per_segment`, `solver`: each segment is integrated by
        `steps_per_segment` fixed steps of `solver` (default `diffrax.Tsit5()`).
    - `stabilization`, `saddle_solver`: as for simulate (default: projection,
        so the nodes end up on the constraint manifold).
    - `ts`: where `trajectory` is saved.
    - `condense`: `True` eliminates the node states from each Newton step (the
        matrix factorized has the size of the controls: fast). The eliminated
        states are then expressed through products of the segments'
        sensitivities, which grow like exp(rate * t1) on an unstable system;
        where that passes ~1e6 (a double pendulum held upright for seconds, a
        pendulum pumped up over 8 s: the inertia correction then fails),
        `False` factorizes the whole KKT matrix, dense, (2n + 1) K + r unknowns
        and constraints: slower, with the stability multiple shooting is for.
        The default `None` condenses and, where that fails in a call outside
        `jax.jit`/`jax.vmap`, solves again from the same guess with `False`
        (with a warning; under a transformation nothing can be re-run: pass
        `False` there for such problems).
    - `tol`: the KKT error at which to stop; `max_steps`: iterations at most.
    - `progress`: `True` to print a line per iteration (cost, violation, KKT
        error, barrier parameter, step length, regularization); or a function
        called with those (iteration, cost, violation, kkt_error, mu, alpha,
        delta_w) from the compiled loop, e.g. to record the convergence.

    Runs under `jax.jit` and `jax.vmap` (e.g. over a batch of `params`: one
    call solves many problems).

    **Returns:**

    A [`lagrax.ControlResult`][].
    """
    keys = (controls,) if isinstance(controls, str) else tuple(controls)
    problem = _transcribe(
        system, params, keys, q0, qd0, t0, t1, segments, cost, terminal, path,
        bounds, steps_per_segment, solver, stabilization, saddle_solver,
    )  # fmt: skip
    x0 = problem.guess(params, states_guess)
    report = progress if callable(progress) else _print_progress if progress else None
    sol = _nlp(problem, params, x0, condense is not False, tol, max_steps, report)
    if condense is None and _concretely(sol.failed):
        warnings.warn(
            f"optimize_controls: the condensed Newton steps failed at iteration "
            f"{int(sol.iterations)} (the eliminated node states are conditioned "
            "like single shooting); solving again from the same guess with the "
            "whole KKT matrix (condense=False; pass it to skip the first "
            "attempt).",
            stacklevel=2,
        )
        sol = _nlp(problem, params, x0, False, tol, max_steps, report)
    p_opt = problem.with_controls(params, problem.controls_of(sol.x))
    nodes = problem.node_trajectory(sol.x, params)
    boundaries = problem.boundaries
    saved = boundaries if ts is None else jnp.asarray(ts)
    traj = simulate(
        system, problem.q0, problem.qd0, p_opt, t0=t0, t1=t1, ts=saved,
        jump_ts=boundaries[1:-1], stabilization=problem.stabilization,
        saddle_solver=problem.saddle_solver, rtol=1e-10, atol=1e-10,
        max_steps=_RESIMULATION_MAX_STEPS, throw=False,
    )  # fmt: skip
    if terminal is None:
        terminal_error = jnp.zeros((), sol.objective.dtype)
    else:
        residual = jnp.asarray(terminal(traj.q[-1], traj.qd[-1], p_opt))
        terminal_error = jnp.max(jnp.abs(residual), initial=0.0)
    if _concretely(sol.converged & (terminal_error > _FAITHFUL)):
        warnings.warn(
            f"optimize_controls: converged, but the optimal controls simulated "
            f"with adaptive steps miss the terminal conditions by "
            f"{float(terminal_error):.1e} at t1: the transcription (each segment "
            f"{problem.steps} fixed steps of {type(problem.solver).__name__}) is "
            "too coarse for this motion; raise steps_per_segment or segments.",
            stacklevel=2,
        )
    return ControlResult(
        p_opt, traj, nodes, sol.converged, sol.iterations, sol.objective,
        sol.max_violation, sol.kkt_error, terminal_error, sol.failed,
    )  # fmt: skip


# Above this max |terminal| of the re-simulated controls, a warning.
_FAITHFUL = 1e-3
# The first guess's simulation and the optimum's re-simulation share this, so
# that they are one compiled program.
_RESIMULATION_MAX_STEPS = 65536


def _nlp(problem, params, x0, condense, tol, max_steps, progress):
    return interior_point(
        problem.objective, problem.constraints, x0, problem.lower, problem.upper,
        params,
        hessian=problem.hessian, jacobian=problem.jacobian,
        eliminate=_Chain(problem.num_nodes, 2 * problem.n) if condense else 0,
        tol=tol,
        max_steps=max_steps, progress=progress,
    )  # fmt: skip


def _concretely(flag) -> bool:
    """`flag` is a value (not traced under jit or vmap) and true."""
    value = _concrete(flag)
    return value is not None and bool(value)


def _print_progress(k, cost, violation, error, mu, alpha, delta_w):
    print(
        f"iter {int(k):3d}  cost {float(cost):.6e}  violation {float(violation):.2e}"
        f"  kkt {float(error):.2e}  mu {float(mu):.1e}  step {float(alpha):.2g}"
        f"  reg {float(delta_w):.1e}",
        flush=True,
    )


def _transcribe(system, params, keys, q0, qd0, t0, t1, segments, cost, terminal,
                path, bounds, steps, solver, stabilization, saddle_solver):  # fmt: skip
    name = "optimize_controls"
    if not isinstance(system, System):
        raise TypeError(f"{name}: system must be a lagrax.System, got {system!r}.")
    if not isinstance(params, dict):
        raise TypeError(
            f"{name}: params must be a dict holding the controls {keys}, got "
            f"{type(params).__name__}."
        )
    for key in keys:
        if key not in params:
            raise KeyError(
                f"{name}: controls={key!r} is not a key of params (keys: "
                f"{sorted(params)}); put the control values there."
            )
        if jnp.ndim(params[key]) < 1:
            raise ValueError(
                f"{name}: params[{key!r}] must be an array of control values with "
                f"one row per knot, got shape {jnp.shape(params[key])}."
            )
    for key in bounds or {}:
        if key not in keys:
            raise KeyError(
                f"{name}: bounds has the key {key!r}, which is not among the "
                f"controls {keys}."
            )
    if segments is None:
        segments = jnp.shape(params[keys[0]])[0]
    if int(segments) < 1:
        raise ValueError(f"{name}: segments must be >= 1, got {segments}.")
    if int(steps) < 1:
        raise ValueError(f"{name}: steps_per_segment must be >= 1, got {steps}.")
    if not float(t1) > float(t0):
        raise ValueError(f"{name}: t1={t1} must be after t0={t0}.")
    for fn, label in ((cost, "cost"), (terminal, "terminal"), (path, "path")):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name}: {label} must be a function, got {fn!r}.")
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    dtype = jnp.result_type(q0, qd0, *jax.tree.leaves(params), float)
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)
    if q0.ndim != 1 or qd0.shape != q0.shape:
        raise ValueError(
            f"{name}: q0 and qd0 must be vectors of one length, got shapes "
            f"{q0.shape} and {qd0.shape}."
        )
    boundaries = jnp.linspace(t0, t1, int(segments) + 1, dtype=dtype)
    edges = np.linspace(float(t0), float(t1), int(segments) + 1)
    windows = _control_windows(system, params, keys, edges, q0.size)
    shapes = tuple(jnp.shape(params[k]) for k in keys)
    num_path = _num_path(path, boundaries, q0, qd0, params)
    lower, upper = _bound_arrays(
        keys, shapes, bounds or {}, dtype, int(segments) * 2 * q0.size,
        int(segments) * num_path,
    )  # fmt: skip
    return _Transcription(
        system=system,
        keys=keys,
        shapes=shapes,
        windows=windows,
        q0=q0,
        qd0=qd0,
        boundaries=boundaries,
        cost=cost,
        terminal=terminal,
        path=path,
        lower=lower,
        upper=upper,
        steps=int(steps),
        solver=_differentiable(dfx.Tsit5() if solver is None else solver),
        stabilization=(
            default_stabilization() if stabilization is None else stabilization
        ),
        saddle_solver=SchurCholesky() if saddle_solver is None else saddle_solver,
        num_path=num_path,
    )


def _differentiable(solver):
    """The solver with its Runge-Kutta stage loop differentiable in both modes
    (a bounded loop, as diffrax's DirectAdjoint sets it): the Hessian of each
    segment's part of the Lagrangian is forward over reverse (2.5x faster here
    than forward over forward, the same to round-off)."""
    if isinstance(solver, dfx.AbstractRungeKutta) and solver.scan_kind is None:
        return eqx.tree_at(
            lambda s: s.scan_kind, solver, "bounded", is_leaf=lambda x: x is None
        )
    return solver


def _bound_arrays(keys, shapes, bounds, dtype, num_nodes, num_slacks):
    """lower, upper over the unknowns (nodes, controls, slacks >= 0)."""
    lower = [jnp.full(num_nodes, -jnp.inf, dtype)]
    upper = [jnp.full(num_nodes, jnp.inf, dtype)]
    for key, shape in zip(keys, shapes, strict=True):
        try:
            lo, hi = bounds.get(key, (-jnp.inf, jnp.inf))
            lower.append(jnp.broadcast_to(jnp.asarray(lo, dtype), shape).ravel())
            upper.append(jnp.broadcast_to(jnp.asarray(hi, dtype), shape).ravel())
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"optimize_controls: bounds[{key!r}] must be (lo, hi), scalars or "
                f"arrays that broadcast to params[{key!r}].shape = {shape}."
            ) from error
    lower.append(jnp.zeros(num_slacks, dtype))
    upper.append(jnp.full(num_slacks, jnp.inf, dtype))
    return jnp.concatenate(lower), jnp.concatenate(upper)


def _num_path(path, boundaries, q0, qd0, params):
    if path is None:
        return 0
    out = jax.eval_shape(path, boundaries[0], q0, qd0, params)
    if len(out.shape) > 1:
        raise ValueError(
            f"optimize_controls: path ({function_name(path)}) must return a vector "
            f"of inequalities g <= 0, got shape {out.shape}."
        )
    return int(np.prod(out.shape))


def _control_windows(system, params, keys, boundaries, n):
    """For each control key, the first knot and the number of knots (the same
    for all segments) of the values that act inside each segment: (K,) starts
    and a width. Found by differentiating the model's functions with respect to
    the control values at times inside each segment, at random states and
    control values (the pattern is structural, not numerical)."""
    rng = np.random.default_rng(0)
    fractions = np.array([1e-6, 0.1, 0.3, 0.5, 0.7, 0.9, 1 - 1e-6])
    times = boundaries[:-1, None] + fractions * np.diff(boundaries)[:, None]
    with jax.ensure_compile_time_eval():
        probe = {
            key: (
                jnp.asarray(rng.normal(size=np.shape(v)))
                if key in keys
                else jax.tree.map(lambda a: jnp.ones(np.shape(a)), v)
            )
            for key, v in params.items()
        }
        q = jnp.asarray(rng.normal(size=n))
        qd = jnp.asarray(rng.normal(size=n))

        def model(u, t):
            p = {**probe, **u}
            out = [jnp.reshape(system.lagrangian(t, q, qd, p), (-1,))]
            if system.forces is not None:
                out.append(jnp.reshape(system.forces(t, q, qd, p), (-1,)))
            if system.constraints is not None:
                out.append(jnp.reshape(system.constraints(t, q, p), (-1,)))
            if system.velocity_constraints is not None:
                out.append(jnp.reshape(system.velocity_constraints(t, q, qd, p), (-1,)))
            return jnp.concatenate(out)

        u = {key: probe[key] for key in keys}
        jac = jax.vmap(jax.vmap(jax.jacfwd(model), (None, 0)), (None, 0))(
            u, jnp.asarray(times)
        )
    windows = []
    for key in keys:
        d = np.asarray(jac[key])  # (K, times, outputs, knots, ...)
        acts = np.any(d.reshape(*d.shape[:3], d.shape[3], -1) != 0, axis=(1, 2, 4))
        if not acts.any():
            raise ValueError(
                f"optimize_controls: the controls params[{key!r}] do not act on "
                "the system: neither its forces nor its Lagrangian or constraints "
                "depend on them. Use them in forces, e.g. "
                f"control(t, p[{key!r}])."
            )
        knots = acts.shape[1]
        first = np.where(acts.any(axis=1), np.argmax(acts, axis=1), 0)
        last = np.where(
            acts.any(axis=1), knots - 1 - np.argmax(acts[:, ::-1], axis=1), 0
        )
        width = int(np.max(last - first + 1))
        starts = np.clip(first, 0, knots - width)
        windows.append((tuple(int(i) for i in starts), width))
    return tuple(windows)


class _Unpack(eqx.Module):
    """fn(*args, params) of held parameters (params, t_end)."""

    fn: Callable

    def __call__(self, *args):
        *args, (params, _) = args
        return self.fn(*args, params)


class _UnpackLagrangian(AbstractLagrangian):
    """`_Unpack` of a Lagrangian that supplies its own M and f (a tree model's):
    keeps `terms`, so a held system does not fall back to autodiff."""

    lagrangian: AbstractLagrangian

    def __call__(self, t, q, qd, held):
        return self.lagrangian(t, q, qd, held[0])

    def terms(self, t, q, qd, held):
        return self.lagrangian.terms(t, q, qd, held[0])


class _HeldForces(eqx.Module):
    forces: Callable

    def __call__(self, t, q, qd, held):
        params, t_end = held
        return self.forces(jnp.minimum(t, t_end), q, qd, params)


def _held_system(system: System) -> System:
    """The system with parameters (params, t_end), its forces evaluated at
    min(t, t_end)."""

    def wrap(fn, kind=_Unpack):
        return None if fn is None else kind(fn)

    lagrangian = system.lagrangian
    return System(
        _UnpackLagrangian(lagrangian)
        if isinstance(lagrangian, AbstractLagrangian)
        else _Unpack(lagrangian),
        wrap(system.constraints),
        wrap(system.forces, _HeldForces),
        wrap(system.velocity_constraints),
    )


class _Transcription(eqx.Module):
    """The NLP of a multiple-shooting problem: unknowns x = (nodes S_1..S_K,
    control values, path slacks)."""

    system: System
    keys: tuple = eqx.field(static=True)
    shapes: tuple = eqx.field(static=True)
    windows: tuple = eqx.field(static=True)
    q0: Array
    qd0: Array
    boundaries: Array
    cost: Callable | None = eqx.field(static=True)
    terminal: Callable | None = eqx.field(static=True)
    path: Callable | None = eqx.field(static=True)
    lower: Array
    upper: Array
    steps: int = eqx.field(static=True)
    solver: dfx.AbstractSolver
    stabilization: AbstractStabilization
    saddle_solver: AbstractSaddleSolver
    num_path: int = eqx.field(static=True)

    # --- layout -----------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.q0.size

    @property
    def segments(self) -> int:
        return self.boundaries.shape[0] - 1

    @property
    def num_nodes(self) -> int:
        """Unknowns (and continuity constraints) of the node states."""
        return self.segments * 2 * self.n

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(s)) for s in self.shapes)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Where each control's values start in x."""
        return tuple(self.num_nodes + int(o) for o in np.cumsum((0, *self.sizes))[:-1])

    @property
    def num_slacks(self) -> int:
        return self.segments * self.num_path

    @property
    def size(self) -> int:
        return self.num_nodes + sum(self.sizes) + self.num_slacks

    def nodes_of(self, x):
        """(K + 1, 2n): the fixed start and the K nodes."""
        s0 = jnp.concatenate([self.q0, self.qd0])
        return jnp.concatenate([s0[None], x[: self.num_nodes].reshape(-1, 2 * self.n)])

    def controls_of(self, x):
        return {
            key: x[o : o + size].reshape(shape)
            for key, o, size, shape in zip(
                self.keys, self.offsets, self.sizes, self.shapes, strict=True
            )
        }

    def slacks_of(self, x):
        return x[self.size - self.num_slacks :].reshape(self.segments, self.num_path)

    def with_controls(self, params, u):
        return {**params, **u}

    # --- segments ---------------------------------------------------------------
    def _local(self, u, k):
        """The control values that act in segment k: a tuple of (width, ...)."""
        return tuple(
            jax.lax.dynamic_slice_in_dim(u[key], jnp.asarray(starts)[k], width)
            for key, (starts, width) in zip(self.keys, self.windows, strict=True)
        )

    def _segment(self, s, local, k, params):
        """The state at the end of segment k from s, with the window values."""
        n = self.n
        u = {}
        windows = zip(self.keys, self.windows, local, strict=True)
        for key, (starts, _), values in windows:
            u[key] = jax.lax.dynamic_update_slice_in_dim(
                params[key], values, jnp.asarray(starts)[k], 0
            )
        p = self.with_controls(params, u)
        ta, tb = self.boundaries[k], self.boundaries[k + 1]
        # The forces see times up to just before tb: a control that jumps at tb
        # (piecewise constant) acts with its value inside the segment at the
        # solver's stages on tb.
        held = (p, jnp.nextafter(tb, ta))
        system = _held_system(self.system)
        # The solver's fixed steps (no adaptive loop, no saving, no diagnosis:
        # only the end state is wanted), each projected as simulate does: a
        # small graph to differentiate twice. A loop over the steps, not the
        # steps unrolled: the program holds one step, whatever
        # steps_per_segment is (the double pendulum on a cart, 8 steps: first
        # solve 133 -> 49 s, almost all of it XLA's compile; warm about 1.2x
        # slower, the same iterates; the cart-pole's warm solve unchanged).
        terms = dfx.ODETerm(VectorField(system, self.stabilization, self.saddle_solver))
        projector = self.stabilization.step_projector(system, self.saddle_solver)
        dt = (tb - ta) / self.steps
        last = self.steps - 1

        def one_step(y, i):
            t_a = ta + i * dt
            t_b = jnp.where(i == last, tb, ta + (i + 1) * dt)
            state = self.solver.init(terms, t_a, t_b, y, held)
            y, *_ = self.solver.step(terms, t_a, t_b, y, held, state, False)
            if projector is not None:
                y = projector(t_b, *y, held)
            return y, None

        y, _ = jax.lax.scan(one_step, (s[:n], s[n:]), jnp.arange(self.steps))
        return jnp.concatenate(y)

    def _ends(self, x, params):
        segment, flat, ks = self._local_functions(x, params)
        return jax.vmap(segment)(flat, ks)

    # --- the NLP ----------------------------------------------------------------
    def node_trajectory(self, x, params):
        nodes = self.nodes_of(x)
        p = self.with_controls(params, self.controls_of(x))
        n = self.n
        empty = (
            jnp.zeros((0,), nodes.dtype),
            jnp.zeros((0, n), nodes.dtype),
            jnp.zeros((0, n), nodes.dtype),
        )
        traj, _ = evaluate_trajectory(
            self.system, NoStabilization(), self.saddle_solver, self.boundaries,
            nodes[:, :n], nodes[:, n:], p, {}, RESULTS.successful, empty,
        )  # fmt: skip
        return traj

    def objective(self, x, params):
        if self.cost is None:
            return jnp.zeros((), x.dtype)
        p = self.with_controls(params, self.controls_of(x))
        return jnp.asarray(self.cost(self.node_trajectory(x, params), p), x.dtype)

    def _others(self, x, params):
        """Terminal and path constraints: cheap functions of the nodes."""
        nodes = self.nodes_of(x)
        p = self.with_controls(params, self.controls_of(x))
        n = self.n
        out = []
        if self.terminal is not None:
            out.append(
                jnp.reshape(self.terminal(nodes[-1, :n], nodes[-1, n:], p), (-1,))
            )
        if self.path is not None:
            g = jax.vmap(
                lambda t, s: jnp.reshape(self.path(t, s[:n], s[n:], p), (-1,))
            )(self.boundaries[1:], nodes[1:])
            out.append((g + self.slacks_of(x)).ravel())
        if not out:
            return jnp.zeros((0,), x.dtype)
        return jnp.concatenate(out).astype(x.dtype)

    def constraints(self, x, params):
        continuity = self.nodes_of(x)[1:] - self._ends(x, params)
        return jnp.concatenate([continuity.ravel(), self._others(x, params)])

    def _segment_variables(self):
        """(K, 2n + W): the index in x of each local unknown of each segment
        (its start node, then its control windows); size for the fixed start."""
        k = np.arange(self.segments)
        two_n = 2 * self.n
        node = (k[:, None] - 1) * two_n + np.arange(two_n)
        node = np.where(k[:, None] >= 1, node, self.size)  # dropped
        parts = [node]
        for (starts, width), o, shape in zip(
            self.windows, self.offsets, self.shapes, strict=True
        ):
            per_knot = int(np.prod(shape[1:]))
            first = o + np.asarray(starts)[:, None] * per_knot
            parts.append(first + np.arange(width * per_knot))
        return np.concatenate(parts, axis=1)

    def _local_functions(self, x, params):
        """Segment k as a function of its flat local unknowns, and those."""
        u = self.controls_of(x)
        p = self.with_controls(params, u)
        starts = self.nodes_of(x)[:-1]
        ks = jnp.arange(self.segments)
        local = jax.vmap(lambda k: self._local(u, k))(ks)
        flat = jnp.concatenate(
            [starts] + [v.reshape(self.segments, -1) for v in local], axis=1
        )
        two_n = 2 * self.n

        def segment(z, k):
            pieces, o = [], two_n
            for (_, width), shape in zip(self.windows, self.shapes, strict=True):
                size = width * int(np.prod(shape[1:]))
                pieces.append(z[o : o + size].reshape(width, *shape[1:]))
                o += size
            return self._segment(z[:two_n], tuple(pieces), k, p)

        return segment, flat, ks

    def jacobian(self, x, params):
        segment, flat, ks = self._local_functions(x, params)
        blocks = jax.vmap(jax.jacfwd(segment))(flat, ks)  # (K, 2n, 2n + W)
        two_n, kk = 2 * self.n, self.segments
        variables = self._segment_variables()
        rows = np.arange(kk)[:, None] * two_n + np.arange(two_n)
        jac = jnp.zeros((self.num_nodes, self.size), x.dtype)
        jac = jac.at[rows[:, :, None], variables[:, None, :]].add(-blocks, mode="drop")
        jac = jac.at[np.arange(self.num_nodes), np.arange(self.num_nodes)].add(1.0)
        others = jax.jacfwd(self._others)(x, params).reshape(-1, self.size)
        return jnp.concatenate([jac, others])

    def hessian(self, x, lam, params):
        segment, flat, ks = self._local_functions(x, params)
        two_n = 2 * self.n
        lam_c = lam[: self.num_nodes].reshape(self.segments, two_n)

        def weighted(z, k, l):
            return -l @ segment(z, k)

        blocks = jax.vmap(jax.hessian(weighted))(flat, ks, lam_c)
        return _ShootingHessian(self, x, lam[self.num_nodes :], params, blocks)

    def guess(self, params, states_guess):
        n, kk = self.n, self.segments
        u = {key: jnp.asarray(params[key], self.q0.dtype) for key in self.keys}
        x_u = jnp.concatenate([u[key].ravel() for key in self.keys])
        if states_guess is None:
            p = self.with_controls(params, u)
            traj = simulate(
                self.system, self.q0, self.qd0, p, t0=self.boundaries[0],
                t1=self.boundaries[-1], ts=self.boundaries,
                jump_ts=self.boundaries[1:-1], stabilization=self.stabilization,
                saddle_solver=self.saddle_solver, rtol=1e-6, atol=1e-6,
                max_steps=_RESIMULATION_MAX_STEPS, throw=False,
            )  # fmt: skip
            # (The same program as the re-simulation of the optimum where no ts
            # is asked for: tolerances are traced, max_steps is not. A guess
            # that fails stops well before it: a collapsing step ends it.)
            q, qd = traj.q, traj.qd
            ok = jnp.isfinite(q) & jnp.isfinite(qd)
            q = jnp.where(ok, q, self.q0)
            qd = jnp.where(ok, qd, self.qd0)
        else:
            q, qd = (jnp.asarray(a, self.q0.dtype) for a in states_guess)
            if q.shape != (kk + 1, n) or qd.shape != (kk + 1, n):
                raise ValueError(
                    "optimize_controls: states_guess must be (q, qd) of shape "
                    f"(segments + 1, n) = ({kk + 1}, {n}), got {q.shape} and "
                    f"{qd.shape}."
                )
        nodes = jnp.concatenate([q, qd], axis=1)[1:].ravel()
        x = jnp.concatenate([nodes, x_u, jnp.zeros(self.num_slacks, nodes.dtype)])
        if self.num_slacks:
            g = self._others(x, params)[-self.num_slacks :]
            x = x.at[self.size - self.num_slacks :].set(jnp.maximum(-g, 0.0))
        return x


class _Chain(Elimination):
    """The continuity conditions S_(k+1) - F_k(S_k, u) = 0 of the nodes in
    order: Jy is the identity less the blocks A_k = dF_k/dS_k below its
    diagonal, so Jy^-1 b is the recursion y_k = b_k + A_k y_(k-1) (and Jy^-T b
    the same backwards), K small products instead of a dense triangular
    solve."""

    block: int = eqx.field(static=True)

    def solve(self, jac, b, transpose=False):
        kk, s = self.size // self.block, self.block
        jy = jac[: self.size, : self.size].reshape(kk, s, kk, s)
        below = -jy[np.arange(1, kk), :, np.arange(kk - 1), :]  # A_1 .. A_(K-1)
        rows = b.reshape(kk, s, -1)
        if transpose:
            # y_(K-1) = b_(K-1), y_k = b_k + A_(k+1)^T y_(k+1).
            a, rows = jnp.swapaxes(below, 1, 2)[::-1], rows[::-1]
        else:
            a = below

        def body(y, ab):
            a_k, b_k = ab
            y = b_k + a_k @ y
            return y, y

        first = rows[0]
        _, rest = jax.lax.scan(body, first, (a, rows[1:]))
        y = jnp.concatenate([first[None], rest])
        if transpose:
            y = y[::-1]
        return y.reshape(b.shape)


class _ShootingHessian(AbstractHessian):
    """The Hessian of the Lagrangian of a multiple-shooting problem as its
    parts: one (L, L) block per segment over the segment's own unknowns (its
    start node and control windows), and the Hessian of the rest (cost,
    terminal and path constraints), applied by forward-over-reverse products
    instead of formed over all of x."""

    problem: "_Transcription"
    x: Array
    lam_others: Array
    params: PyTree
    blocks: Array  # (K, L, L)

    def _rest(self, x):
        problem, params = self.problem, self.params
        return problem.objective(x, params) + self.lam_others @ problem._others(
            x, params
        )

    def _local(self, v):
        """v (n, ...) gathered per segment (K, L, ...): 0 for the fixed start."""
        pad = jnp.concatenate([v, jnp.zeros((1, *v.shape[1:]), v.dtype)])
        return pad[self.problem._segment_variables()]

    def mv(self, v):
        local = jnp.einsum("klm,km->kl", self.blocks, self._local(v))
        out = (
            jnp.zeros_like(v)
            .at[self.problem._segment_variables()]
            .add(local, mode="drop")
        )
        _, rest = jax.jvp(jax.grad(self._rest), (self.x,), (v,))
        return out + rest

    def sandwich(self, p):
        local = self._local(p)  # (K, L, k)
        segments = jnp.einsum("kla,klm,kmb->ab", local, self.blocks, local)
        zero = jnp.zeros(p.shape[1], p.dtype)
        rest = jax.hessian(lambda v: self._rest(self.x + p @ v))(zero)
        return segments + rest

    def dense(self):
        size = self.x.shape[0]
        variables = self.problem._segment_variables()
        hess = jnp.zeros((size, size), self.x.dtype)
        hess = hess.at[variables[:, :, None], variables[:, None, :]].add(
            self.blocks, mode="drop"
        )
        return hess + jax.hessian(self._rest)(self.x)
