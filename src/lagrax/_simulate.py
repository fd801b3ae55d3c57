"""`simulate`: integrate a constrained system with diffrax."""

import warnings
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import ArrayLike, Float, Real

from ._custom_types import Params, RealScalarLike
from ._diagnosis import diagnose, initial_checks, probe_states
from ._dynamics import VectorField
from ._errors import check_result, checks_as_nan
from ._inputs import (
    check_arguments,
    coerce_params,
    coerce_state,
    valid_arguments,
)
from ._results import RESULTS, is_failure
from ._saddle import AbstractSaddleSolver, SchurCholesky
from ._solvers import RK4
from ._stabilization import AbstractStabilization, Projection
from ._system import System
from ._trajectory import Trajectory, evaluate_trajectory
from ._wrapped import STOPPED, GuardedSolver


def default_solver() -> dfx.AbstractSolver:
    """The solver `simulate` uses when none is given."""
    return dfx.Dopri8()


def default_stabilization() -> AbstractStabilization:
    """The stabilization `simulate` uses when none is given."""
    return Projection()


def simulate(
    system: System,
    q0: Float[ArrayLike, " n"],
    qd0: Float[ArrayLike, " n"],
    params: Params,
    *,
    t1: RealScalarLike,
    t0: RealScalarLike = 0.0,
    ts: Real[ArrayLike, " T"] | None = None,
    solver: dfx.AbstractSolver | None = None,
    stabilization: AbstractStabilization | None = None,
    saddle_solver: AbstractSaddleSolver | None = None,
    rtol: RealScalarLike = 1e-8,
    atol: RealScalarLike = 1e-8,
    stepsize_controller: dfx.AbstractStepSizeController | None = None,
    dt0: RealScalarLike | None = None,
    step_ts: Real[ArrayLike, " K"] | None = None,
    jump_ts: Real[ArrayLike, " J"] | None = None,
    event: Callable[..., Any] | None = None,
    max_steps: int = 4096,
    adjoint: dfx.AbstractAdjoint | None = None,
    progress: bool | dfx.AbstractProgressMeter = False,
    throw: bool = True,
    project_initial: bool = False,
    initial_tol: RealScalarLike | None = None,
) -> Trajectory:
    """Simulate a constrained mechanical system from (q0, qd0) over [t0, t1].

    Integrates the index-1 form qd' = qdd(t, q, qd) of the equations of motion,
    with (qdd, lam) from the saddle-point solve at every stage, using diffrax.
    Runs under `jax.jit`, `jax.vmap` and `jax.grad`; a second call with the same
    system, strategies and array shapes reuses the compiled code.

    **Arguments:**

    - `system`: the [`lagrax.System`][].
    - `q0`, `qd0`: initial coordinates and velocities (n,). They should satisfy the
        constraints: see [`lagrax.consistent_state`][].
    - `params`: any pytree of parameters, passed to the user's functions.
    - `t1`, `t0`: end and start time.
    - `ts`: times at which to save (within [t0, t1], increasing). Default: t0
        and t1 only.
    - `solver`: any diffrax ODE solver. Default `diffrax.Dopri8()`, which reaches
        the tight tolerances mechanics needs in few steps; `diffrax.Tsit5()` is
        cheaper per step at loose tolerances (1e-6 and looser), an implicit solver
        (`diffrax.Kvaerno5()`) suits stiff systems. A solver without an error
        estimate ([`lagrax.RK4`][], `diffrax.Euler()`) takes fixed steps
        (`diffrax.ConstantStepSize()`: ceil((t1 - t0) / dt0) steps) unless
        `stepsize_controller` says otherwise; `rtol` and `atol` then do
        nothing.
    - `stabilization`: [`lagrax.Projection`][] (default), [`lagrax.Baumgarte`][]
        or [`lagrax.NoStabilization`][].
    - `saddle_solver`: [`lagrax.SchurCholesky`][] (default), [`lagrax.DenseLU`][]
        or [`lagrax.LeastSquares`][] (redundant constraints).
    - `rtol`, `atol`: tolerances of the default step-size controller,
        `diffrax.PIDController(rtol, atol)`.
    - `stepsize_controller`: any diffrax step-size controller; overrides rtol and
        atol. For fixed steps: `diffrax.ConstantStepSize()` with `dt0`.
    - `dt0`: initial (or fixed) step; default chosen automatically.
    - `step_ts`: times the solver must step to exactly, e.g. the knots of a
        piecewise-linear control (`control.knots`), where the forces have kinks:
        keeps the accuracy there, for the solution and for its gradient.
        Adaptive steps only.
    - `jump_ts`: times where the forces jump, e.g. the boundaries of a
        [`lagrax.PiecewiseConstant`][] control (`control.boundaries`): steps end
        just before each and restart just after it, so no step straddles a jump.
        Adaptive steps only.
    - `event`: `event(t, q, qd, params) -> scalar`: the simulation stops where it
        changes sign, located by Newton's method on the solver's interpolant; the
        last saved time is then the event time (`result` says
        `RESULTS.event_occurred`).
    - `max_steps`: the most steps the solver may take.
    - `adjoint`: how to differentiate the solve, any `diffrax.AbstractAdjoint`.
        Default `diffrax.RecursiveCheckpointAdjoint()`.
    - `progress`: `True` for a tqdm progress bar, or any diffrax progress meter.
    - `throw`: raise a runtime error (with the fix in its message) if the solve
        fails. With `throw=False` the failure is reported in `result`.
    - `project_initial`: first move (q0, qd0) to the nearest consistent state, as
        [`lagrax.consistent_state`][] does with every coordinate free.
    - `initial_tol`: without `project_initial`, the initial state counts as
        inconsistent (result `inconsistent_initial_state`) when
        max |phi(t0, q0)| > initial_tol * max(1, |q0|)^2 or
        max |J qd0 + phi_t| (or |A qd0 + b|) > initial_tol * max(1, |q0|) *
        max(1, |qd0|).
        Default sqrt(machine epsilon) of the dtype (1.5e-8 in float64);
        `float("inf")` turns the check off.

    **Returns:**

    A [`lagrax.Trajectory`][]: ts, q, qd, qdd, multipliers, phi, phi_dot, energy,
    stats, result.

    **Raises:**

    `ValueError` for inputs of the wrong shape or functions returning the wrong
    shape (at trace time), and for arguments that cannot be meant, named: NaN or
    inf `t0`, `t1`, `ts` or `dt0`, `rtol` or `atol` <= 0, `max_steps` < 1, `ts`
    not running from t0 to t1 (values traced under jit are reported at runtime
    instead, as `RESULTS.invalid_arguments`). Under `throw=True`, a runtime error
    (`equinox.EquinoxRuntimeError`) with the message of the failure (under
    `jax.vmap`, the failed members by index): raised after the compiled program
    when called from Python, which keeps the program free of host callbacks for
    JAX's persistent compilation cache; compiled in under the caller's own jit
    or vmap. With `throw=False`, never: the failure is `result`. Inside the
    solve, equinox's checks (`eqx.error_if`, also in the user's own functions)
    return NaN rather than raise, and the NaN is named by `result`; with
    `EQX_ON_ERROR=raise` in the environment they raise as written.

    A failure inside the integration (NaN terms, a mass matrix that is not
    positive definite, constraints that lose rank) ends the solve at once, and
    `result` names it: the solver shrinks its step until it is at round-off of
    the time, stops, and the saddle system is solved at the last state reached
    and just beyond it to find the cause.
    """
    q0, qd0 = coerce_state(q0, qd0)
    dtype = q0.dtype
    params = coerce_params(params, dtype)
    check_arguments(
        "simulate", t0=t0, t1=t1, ts=ts, dt0=dt0, max_steps=max_steps,
        **({} if stepsize_controller is not None else dict(rtol=rtol, atol=atol)),
    )  # fmt: skip
    if solver is None:
        solver = default_solver()
    if stabilization is None:
        stabilization = default_stabilization()
    if saddle_solver is None:
        saddle_solver = SchurCholesky()
    tolerances = None
    if stepsize_controller is None and not _estimates_errors(solver):
        if dt0 is None:
            raise ValueError(
                f"simulate: solver {type(solver).__name__} has no error estimate, "
                "so it takes fixed steps: give dt0, the step (or an adaptive "
                "solver such as diffrax.Dopri8(), the default)."
            )
        stepsize_controller = dfx.ConstantStepSize()
    fixed = stepsize_controller is not None and not isinstance(
        stepsize_controller, dfx.AbstractAdaptiveStepSizeController
    )
    if fixed and (step_ts is not None or jump_ts is not None):
        raise ValueError(
            "simulate: step_ts and jump_ts need adaptive steps; with fixed steps "
            f"({type(solver).__name__} without an error estimate, or a constant "
            "step-size controller) choose dt0 so that the steps land on those "
            "times, or use an adaptive solver such as diffrax.Dopri8()."
        )
    if stepsize_controller is None:
        _warn_if_too_tight(rtol, atol, dtype)
        tolerances = _strong(rtol, dtype), _strong(atol, dtype)
    if step_ts is not None:
        step_ts = _strong(step_ts, dtype)
    if jump_ts is not None:
        jump_ts = _strong(jump_ts, dtype)
    if adjoint is None:
        adjoint = dfx.RecursiveCheckpointAdjoint()
    if progress is True:
        progress = dfx.TqdmProgressMeter()
    elif progress is False:
        progress = dfx.NoProgressMeter()
    times = _strong(t0, dtype), _strong(t1, dtype)
    if ts is not None:
        ts = _strong(ts, dtype)
    if dt0 is not None:
        dt0 = _strong(dt0, dtype)
    if initial_tol is None:
        initial_tol = float(jnp.finfo(dtype).eps) ** 0.5
    initial = (bool(project_initial), _strong(initial_tol, dtype))
    steps = (stepsize_controller, tolerances, (step_ts, jump_ts), dt0, max_steps)
    # Solved without the failure check compiled in, which is made here on the
    # host when the result is concrete (see `_errors.py`: the program can then be
    # cached between processes), or in the caller's trace.
    traj = _simulate(
        system,
        stabilization,
        saddle_solver,
        solver,
        steps,
        adjoint,
        progress,
        q0,
        qd0,
        params,
        times,
        ts,
        event,
        initial,
    )
    return check_result(traj, traj.result, throw)


def _estimates_errors(solver) -> bool:
    """Whether the solver gives the error estimate adaptive steps need: by its
    class (diffrax's isinstance sees through one wrapper, so that
    `diffrax.HalfSolver(lx.RK4())`, which estimates errors, would look like
    RK4); a wrapper that is not adaptive itself is asked about what it wraps."""
    cls = type(solver)
    if issubclass(cls, dfx.AbstractWrappedSolver) and not issubclass(
        cls, dfx.AbstractAdaptiveSolver
    ):
        return _estimates_errors(solver.solver)
    return issubclass(cls, dfx.AbstractAdaptiveSolver) and not issubclass(cls, RK4)


@eqx.filter_jit
def _simulate(*args) -> Trajectory:
    # diffrax's own checks of the arguments, which `valid_arguments` makes
    # (a failure is a result code), without host callbacks: see `_errors.py`.
    with checks_as_nan():
        return _simulate_traced(*args)


def _simulate_traced(
    system,
    stabilization,
    saddle_solver,
    solver,
    steps,
    adjoint,
    progress,
    q0,
    qd0,
    params,
    times,
    ts,
    event,
    initial,
) -> Trajectory:
    controller, tolerances, (step_ts, jump_ts), dt0, max_steps = steps
    t0, t1 = times
    valid = valid_arguments(t0, t1, ts, dt0, tolerances or ())
    # Invalid (traced) arguments are reported, and replaced by harmless ones so
    # that nothing downstream raises on them with throw=False.
    t0, t1, ts, dt0, tolerances = _harmless(valid, t0, t1, ts, dt0, tolerances)
    q0, qd0, initial_result = initial_checks(system, q0, qd0, params, t0, *initial)
    initial_result = RESULTS.where(valid, initial_result, RESULTS.invalid_arguments)
    failed_start = is_failure(initial_result)
    q0, qd0 = (jnp.where(jnp.isfinite(x), x, 0) for x in (q0, qd0))
    if controller is None:
        controller = dfx.PIDController(rtol=tolerances[0], atol=tolerances[1])
    if step_ts is not None or jump_ts is not None:
        controller = dfx.ClipStepSizeController(
            controller, step_ts=step_ts, jump_ts=jump_ts
        )
    adaptive = isinstance(controller, dfx.AbstractAdaptiveStepSizeController)
    field = VectorField(system, stabilization, saddle_solver)
    saveat = dfx.SaveAt(t0=True, t1=True) if ts is None else dfx.SaveAt(ts=ts, t1=True)
    wrapped = GuardedSolver(
        solver,
        stabilization.step_projector(system, saddle_solver),
        failed_start,
        jnp.maximum(jnp.abs(t0), jnp.abs(t1)),
        adaptive,
    )
    if isinstance(adjoint, dfx.BacksolveAdjoint) and "solver" not in adjoint.kwargs:
        # The backward (adjoint) ODE has a state of its own, which a wrapper that
        # acts on (q, qd) cannot treat: solve it with the plain solver.
        adjoint = dfx.BacksolveAdjoint(solver=solver, **adjoint.kwargs)
    sol = dfx.diffeqsolve(
        dfx.ODETerm(field),
        wrapped,
        t0,
        t1,
        dt0,
        (q0, qd0),
        args=params,
        saveat=saveat,
        stepsize_controller=controller,
        adjoint=adjoint,
        max_steps=max_steps,
        throw=False,
        progress_meter=progress,
        event=None if event is None else _event(event, q0.dtype),
    )
    result = RESULTS.promote(sol.result)
    result = RESULTS.where(
        result == RESULTS.max_steps_reached, RESULTS.max_steps, result
    )
    stopped = RESULTS.step_size_collapsed if adaptive else RESULTS.nonfinite_step
    result = RESULTS.where(result == RESULTS.promote(STOPPED), stopped, result)
    assert sol.ts is not None and sol.ys is not None
    q, qd = sol.ys
    # Saved: t0 and the final state; or ts, then the final state right after the
    # last time reached (the rows after it are inf).
    last = jnp.sum(jnp.isfinite(sol.ts)) - 1
    final = sol.ts[last], q[last], qd[last]
    saved = sol.ts, q, qd
    if ts is not None:
        reached = jnp.arange(ts.shape[0]) < last
        saved = jax.tree.map(
            lambda x: jnp.where(reached.reshape(-1, *[1] * (x.ndim - 1)), x, jnp.inf),
            (sol.ts[:-1], q[:-1], qd[:-1]),
        )
    span = jnp.abs(t1 - t0)
    traj, probed = evaluate_trajectory(
        system,
        stabilization,
        saddle_solver,
        *saved,
        params,
        sol.stats,
        result,
        probes=probe_states(final, span, result),
    )
    result = diagnose(system, params, traj.result, probed, final, (t0, q0))
    # A bad start explains whatever failed after it.
    result = RESULTS.where(failed_start, initial_result, result)
    return eqx.tree_at(lambda tr: tr.result, traj, result)


def _harmless(valid, t0, t1, ts, dt0, tolerances):
    """The arguments where `valid`, else stand-ins that any solve accepts."""
    t0 = jnp.where(valid, t0, 0)
    t1 = jnp.where(valid, t1, 1)
    if ts is not None:
        ts = jnp.where(valid, ts, jnp.linspace(0, 1, ts.shape[0], dtype=ts.dtype))
    if dt0 is not None:
        dt0 = jnp.where(valid, dt0, 0.1)
    if tolerances is not None:
        tolerances = tuple(jnp.where(valid, tol, 1e-3) for tol in tolerances)
    return t0, t1, ts, dt0, tolerances


def _strong(x, dtype):
    # Strongly typed in the state's dtype: a weakly typed time (from a Python
    # float) would make diffrax's internal closures see two different types.
    # Host values become NumPy arrays (traced all the same by filter_jit): no
    # eager JAX operation per argument on every call.
    if isinstance(x, jax.Array):
        return x.astype(dtype)
    return np.asarray(x, dtype=dtype)


class _EventCondition(eqx.Module):
    fn: Callable[..., Any]

    def __call__(self, t, y, args, **kwargs):
        q, qd = y
        return self.fn(t, q, qd, args)


def _event(fn, dtype) -> dfx.Event:
    tol = 100 * float(jnp.finfo(dtype).eps)
    return dfx.Event(_EventCondition(fn), root_finder=optx.Newton(rtol=tol, atol=tol))


def _warn_if_too_tight(rtol, atol, dtype) -> None:
    try:
        positive = [tol for tol in (float(rtol), float(atol)) if tol > 0]
    except (TypeError, jax.errors.ConcretizationTypeError):
        return  # traced tolerances: nothing to say at trace time
    if not positive:
        return
    tightest = min(positive)
    eps = float(jnp.finfo(dtype).eps)
    if tightest < 10 * eps:
        warnings.warn(
            f"simulate: rtol/atol = {tightest:g} is tighter than {jnp.dtype(dtype)} "
            f"can honour (machine epsilon {eps:.1e}). Enable float64 with "
            '`jax.config.update("jax_enable_x64", True)` and pass float64 arrays, '
            "or loosen the tolerances.",
            stacklevel=3,
        )
