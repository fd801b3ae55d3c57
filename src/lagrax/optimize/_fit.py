"""`fit`: physical parameters from observed trajectories.

Least squares by Levenberg-Marquardt with Jacobians by forward mode (default), or
any optax optimizer on any loss. See docs/optimisation.md.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array, ArrayLike, PyTree

from .._custom_types import Params
from .._errors import nan_on_failure
from .._inputs import coerce_params
from .._results import is_failure
from .._simulate import simulate
from .._system import System
from .._trajectory import Trajectory
from ._least_squares import least_squares, residual_vector as _residual_vector
from ._shooting import make_shooting, solve


class FitResult(eqx.Module):
    """What [`lagrax.fit`][] found.

    **Fields:**

    - `params`: all parameters, the fitted ones at their optimum.
    - `loss`: the final loss (by default the sum of squared relative residuals,
        [`lagrax.relative_squared_error`][]).
    - `loss_history`: the loss before each step and after the last, (steps + 1,).
    - `steps`: iterations taken (accepted or rejected).
    - `converged`: whether the convergence tests were met (see `message`).
    - `message`: why it stopped.
    - `residual_norm`: |r| at the optimum (None for a custom loss).
    - `stderr`: standard errors of the fitted parameters, a pytree like the
        fitted part of `params` (None elsewhere); inf for a parameter the data
        cannot determine. None for a custom loss.
    - `covariance`: their covariance matrix (p, p), rows named by
        `covariance_names`.
    - `covariance_names`: the fitted parameters in the order of the covariance
        rows, e.g. `["k", "u[3]"]`.
    - `max_violation`: with `segments=`, the largest continuity error between
        segments at the end (None without).
    """

    params: Params
    loss: float
    loss_history: np.ndarray
    steps: int
    converged: bool
    message: str
    residual_norm: float | None = None
    stderr: PyTree | None = None
    covariance: np.ndarray | None = None
    covariance_names: list[str] | None = None
    max_violation: float | None = None


def relative_squared_error(prediction: PyTree, data: PyTree) -> Array:
    """sum over the leaves of mean((prediction - data)^2) / mean(data^2).

    Each observed quantity is scaled by its own magnitude, so positions in metres
    and forces in newtons can be fitted together.
    """

    # The sum of squares of the residuals `fit` minimizes when no sigma is given:
    # one definition of the scaling for both.
    return jnp.sum(_residual_vector(prediction, data, None) ** 2)


def _mask(name: str, selection, params) -> PyTree:
    """A bool per leaf of params from None (every float), keys, or a bool pytree."""
    if selection is None:
        return jax.tree.map(eqx.is_inexact_array, params)
    if isinstance(selection, str):
        selection = (selection,)
    if isinstance(selection, Sequence):
        if not isinstance(params, dict):
            raise ValueError(
                f"fit: `{name}` as names needs params to be a dict; pass a pytree of "
                "bools with the structure of params instead."
            )
        unknown = sorted(set(selection) - set(params))
        if unknown:
            raise ValueError(
                f"fit: `{name}` names {unknown}, which params does not have; it has "
                f"{sorted(params)}."
            )
        return {
            k: jax.tree.map(lambda _, keep=k in selection: keep, v)
            for k, v in params.items()
        }
    return selection


def fit(
    system: System,
    params: Params,
    observe: Callable[[Trajectory, Params], PyTree],
    data: PyTree,
    *,
    ts: ArrayLike,
    initial_state: tuple[ArrayLike, ArrayLike] | Callable[[Params], tuple],
    fit: Sequence[str] | PyTree | None = None,
    positive: Sequence[str] | PyTree = (),
    sigma: PyTree | None = None,
    experiments: int | None = None,
    segments: int | None = None,
    states_guess: tuple[ArrayLike, ArrayLike] | None = None,
    loss: Callable[[PyTree, PyTree], Array] = relative_squared_error,
    optimizer: optax.GradientTransformation | None = None,
    solver: optx.AbstractLeastSquaresSolver | None = None,
    max_steps: int = 200,
    rtol: float = 1e-6,
    atol: float = 1e-12,
    progress: bool = True,
    print_every: int = 10,
    **simulate_kwargs: Any,
) -> FitResult:
    """Fit parameters of a system so that its simulation matches observed data.

    Minimizes `loss(observe(simulate(system, q0, qd0, params, ts=ts), params),
    data)` over the chosen parameters, differentiating through the whole
    trajectory. The observation is any function of the [`lagrax.Trajectory`][]:
    coordinates, a marker point, an energy, or the constraint forces
    (`traj.multipliers`), which makes measured joint reactions usable as data.

    By default the loss is a sum of squares, `sum(r^2)` with residuals
    `r = (prediction - data) / scale` per observed quantity (scale: its noise
    level `sigma` if given, else its root mean square times sqrt(size), which is
    [`lagrax.relative_squared_error`][]), minimized by Levenberg-Marquardt
    (optimistix) with the Jacobian by forward mode: few iterations, a real
    convergence test, and standard errors. With `optimizer=` (any optax
    optimizer) or a custom `loss=`, gradient-based minimization instead. The
    least-squares solve is compiled once per model, observation function and
    shapes: a second fit with other data or starting values reuses it.

    **Arguments:**

    - `system`: the [`lagrax.System`][].
    - `params`: the starting parameters (the fitted ones are initial guesses).
    - `observe`: `observe(traj, params) -> prediction`, a pytree like `data`.
    - `data`: the observations at the times `ts`. With `experiments=E`, each leaf
        has a leading axis of E experiments.
    - `ts`: observation times; the simulation runs from `ts[0]` (or `t0=`) to
        `ts[-1]`.
    - `initial_state`: `(q0, qd0)`, or a function `params -> (q0, qd0)` when the
        start depends on fitted parameters (e.g. `model.initial_state`); gradients
        flow through [`lagrax.consistent_state`][]. With `experiments=E`, arrays of
        shape (E, n).
    - `fit`: the parameters to fit: names (for a dict of parameters) or a pytree
        of bools; default every floating-point leaf.
    - `positive`: parameters fitted in log space, so they stay positive.
    - `sigma`: the noise level of each observed quantity (a pytree like `data`,
        of scalars or arrays): residuals in units of sigma, and standard errors
        from it rather than from the scatter of the residuals. The message then
        also says when the residuals stay well above sigma at the optimum (a
        local minimum, or a model that does not describe the data).
    - `experiments`: the number E of experiments (data sets with their own
        initial states, the parameters shared); default one.
    - `segments`: multiple shooting (Bock 1987): the saved times cut into this
        many segments, whose start states (the nodes) become unknowns beside the
        parameters, every segment simulated at once under `vmap`, continuity
        between them held as equality constraints by a constrained Gauss-Newton
        method with a line search on an exact penalty. For long or chaotic
        horizons, where the loss of one simulation over the whole is too
        nonlinear in the parameters; with `states_guess` (nodes started on the
        data) the parameters are first fitted with the segments decoupled, then
        the nodes restart from the guess with continuity imposed. Segments of
        a few dozen saved times suit most problems (the chaotic double pendulum
        in examples/chaotic_fit.py: 0.2 s at 100 Hz). Least squares only.
    - `states_guess`: with `segments`, `(q, qd)` at every time of `ts` (each
        (T, n), or (E, T, n) with experiments), e.g. measured positions and
        their finite differences: the nodes start there. Default: a simulation
        at the starting parameters.
    - `loss`: `loss(prediction, data) -> scalar`, for the optax path; default
        [`lagrax.relative_squared_error`][] (the least-squares form above).
    - `optimizer`: an optax optimizer, to minimize `loss` by its gradient
        (reverse mode) instead of by least squares; `optax.lbfgs()` if `loss` is
        custom and none is given.
    - `solver`: any `optimistix.AbstractLeastSquaresSolver` (`GaussNewton`,
        `Dogleg`, ...); default `optimistix.LevenbergMarquardt(rtol, atol)`.
    - `max_steps`: iterations at most.
    - `rtol`, `atol`: least squares stop when an accepted step changes the free
        parameters z by less than `atol + rtol * max|z|` (MINPACK's step test);
        `converged` also needs the gradient test: the Gauss-Newton step from the
        final point (the gradient scaled by the Gauss-Newton matrix) within the
        same tolerance, or below a hundredth of the standard errors. Keep them
        looser than the simulation's tolerances (by default 1e-8; tighter
        through `stepsize_controller=`): the residuals and their Jacobian are
        no more accurate than the simulation. On the
        optax path, `rtol` is the relative change of the loss below which three
        consecutive steps stop the run (the gradient test applies to the
        default loss).
    - `progress`: print the loss every `print_every` steps and a summary.
    - `**simulate_kwargs`: passed to [`lagrax.simulate`][] (tolerances,
        stabilization, step-size controller, ...). Not its ODE `solver`:
        `solver` here is the least-squares solver, so the simulations use
        simulate's default, `diffrax.Dopri8()`.

    **Returns:**

    A [`lagrax.FitResult`][].
    """
    params = coerce_params(params)
    ts = jnp.asarray(ts)
    fit_mask = _mask("fit", fit, params)
    positive_mask = _mask("positive", positive, params)
    fitted, frozen = eqx.partition(params, fit_mask)
    log_mask = jax.tree.map(lambda f, p: bool(f) and bool(p), fit_mask, positive_mask)
    for path, value in jax.tree_util.tree_leaves_with_path(
        eqx.filter(params, log_mask)
    ):
        if not np.all(np.asarray(value) > 0):
            raise ValueError(
                f"fit: positive parameter {jax.tree_util.keystr(path)} must start > 0, "
                f"got {value}."
            )
    if not jax.tree.leaves(fitted):
        raise ValueError("fit: no parameter to fit (`fit` selects no float leaf).")
    fitted_log = eqx.filter(log_mask, fit_mask)  # the structure of `fitted`
    least_squares_form = loss is relative_squared_error and optimizer is None
    simulate_kwargs.setdefault("t0", ts[0])
    simulate_kwargs["throw"] = False
    # Few unknowns, many residuals: Jacobians by forward mode, unless the user
    # chose an adjoint. The optax path differentiates its loss in reverse mode.
    user_adjoint = simulate_kwargs.pop("adjoint", None)
    forward = user_adjoint if user_adjoint is not None else dfx.ForwardMode()
    jac = "fwd" if isinstance(forward, dfx.ForwardMode) else "bwd"
    problem = _Problem(
        system, observe, initial_state, ts, data,
        None if sigma is None else jax.tree.map(jnp.asarray, sigma),
        frozen, fitted_log, experiments, {**simulate_kwargs, "adjoint": forward},
    )  # fmt: skip
    _check_data(problem, params)
    z0 = _strongly_typed(problem.to_free(fitted))
    start = time.perf_counter()
    at_optimum = None
    violation = None
    if segments is not None:
        if not least_squares_form or solver is not None or jac != "fwd":
            raise ValueError(
                "fit: segments= (multiple shooting) has its own constrained "
                "Gauss-Newton solver with forward-mode Jacobians; it cannot be "
                "combined with optimizer=, loss=, solver= or a reverse-mode adjoint."
            )
        shooting, nodes0 = make_shooting(problem, segments, params, states_guess)
        out, at_optimum = solve(
            shooting, z0, nodes0, decouple=states_guess is not None,
            max_steps=max_steps, rtol=rtol, atol=atol,
            progress=progress, print_every=print_every,
        )  # fmt: skip
        z, history, steps, terminated, message, violation = out
        history = history[: steps + 1]
    elif least_squares_form:
        if solver is None:
            solver = optx.LevenbergMarquardt(rtol=rtol, atol=atol)
        out = least_squares(
            problem, solver, z0, max_steps=max_steps, jac=jac, rtol=rtol,
            atol=atol, progress=progress, print_every=print_every,
        )  # fmt: skip
        (z, history, steps, terminated, message), at_optimum = out
        history = np.asarray(history)[: steps + 1]
    else:
        # simulate's default adjoint (None) unless the user chose one.
        reverse = eqx.tree_at(
            lambda pr: pr.simulate_kwargs,
            problem,
            {**simulate_kwargs, "adjoint": user_adjoint},
        )
        z, history, steps, terminated, message = _minimize(
            lambda z: _loss(reverse, z, loss),
            z0, optimizer, max_steps, rtol, progress, print_every,
        )  # fmt: skip
    converged = terminated
    stats = {}
    if loss is relative_squared_error:
        if at_optimum is None:
            at_optimum = _residuals_and_jacobian(problem, z, jac)
        stats = _statistics(*at_optimum, z, fitted_log, sigma is not None, fitted)
        # Stationarity: the Gauss-Newton step from the last point (the gradient
        # scaled by the inverse Gauss-Newton matrix) is within the tolerance, or
        # below a hundredth of the standard errors. A run that stopped on a
        # small step while far from a minimum (a stalled trust region) fails it.
        z_size = max(float(np.max(np.abs(np.asarray(x)))) for x in jax.tree.leaves(z))
        stationary = (
            stats["newton_step"] <= atol + rtol * z_size
            or stats["newton_step_in_stderr"] <= 1e-2
        )
        if converged and not stationary:
            converged = False
            message = (
                f"{message}, but the gradient test failed: a Gauss-Newton step from "
                f"there would still move the parameters by {stats['newton_step']:.1e} "
                f"(> atol + rtol |z| = {atol + rtol * z_size:.1e}, and "
                f"{stats['newton_step_in_stderr']:.1e} standard errors). Raise "
                "max_steps."
            )
        # With the noise level given, the residuals say whether the optimum
        # explains the data: |r|^2 / dof is about 1 if it does.
        misfit = np.sqrt(stats["residual_norm"] ** 2 / stats["dof"])
        if sigma is not None and misfit > 2:
            message = (
                f"{message}; but the residuals are {misfit:.3g} times the noise "
                "level sigma: a local minimum (start closer, or use more data "
                "near the start) or a model that does not describe the data"
            )
    final = float(history[-1])
    result = FitResult(
        params=problem.from_free(z),
        loss=final,
        loss_history=np.asarray(history),
        steps=int(steps),
        converged=bool(converged),
        message=message,
        residual_norm=stats.get("residual_norm"),
        stderr=stats.get("stderr"),
        covariance=stats.get("covariance"),
        covariance_names=stats.get("names"),
        max_violation=violation,
    )
    if progress:
        print(
            f"fit: {result.steps} steps in {time.perf_counter() - start:.1f} s, "
            f"loss {history[0]:.3e} -> {final:.3e} ({message})",
            flush=True,
        )
    return result


class _Problem(eqx.Module):
    """What a fit evaluates: free parameters z -> residuals. A pytree (arrays
    dynamic, functions and settings static), so that a second fit of the same
    model, observation and shapes reuses the compiled solve."""

    system: System
    observe: Callable
    initial_state: Any
    ts: Array
    data: PyTree
    sigma: PyTree | None
    frozen: Params
    fitted_log: PyTree  # bools: which fitted leaves live in log space
    experiments: int | None
    simulate_kwargs: dict

    def to_free(self, p):
        return jax.tree.map(lambda x, log: jnp.log(x) if log else x, p, self.fitted_log)

    def from_free(self, z):
        values = jax.tree.map(
            lambda x, log: jnp.exp(x) if log else x, z, self.fitted_log
        )
        return eqx.combine(values, self.frozen)

    def _one(self, p, q0, qd0):
        ts = self.ts
        traj = simulate(self.system, q0, qd0, p, t1=ts[-1], ts=ts,
                        **self.simulate_kwargs)  # fmt: skip
        return self.observe(traj, p), ~is_failure(traj.result)

    def start(self, p):
        """(q0, qd0) at parameters p: (n,), or (E, n) with experiments."""
        # A start the model cannot reach (consistent_state fails) is NaN, not
        # an exception: the trial point is rejected.
        with nan_on_failure():
            if callable(self.initial_state):
                q0, qd0 = self.initial_state(p)
            else:
                q0, qd0 = self.initial_state
        q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
        e = self.experiments
        if e is not None and (q0.shape[:1] != (e,) or qd0.shape[:1] != (e,)):
            raise ValueError(
                f"fit: with experiments={e}, initial_state must give q0 and qd0 of "
                f"shape ({e}, n); got {q0.shape} and {qd0.shape}."
            )
        return q0, qd0

    def predict(self, p):
        """(prediction, ok): one experiment, or E of them under vmap."""
        q0, qd0 = self.start(p)
        start_ok = jnp.all(jnp.isfinite(q0)) & jnp.all(jnp.isfinite(qd0))
        if self.experiments is None:
            prediction, ok = self._one(p, q0, qd0)
            return prediction, ok & start_ok
        prediction, ok = jax.vmap(self._one, in_axes=(None, 0, 0))(p, q0, qd0)
        return prediction, jnp.all(ok) & start_ok

    def residuals(self, z, args=None):
        del args
        prediction, ok = self.predict(self.from_free(z))
        r = _residual_vector(prediction, self.data, self.sigma)
        # A point the model cannot be evaluated at: non-finite residuals, which
        # the solver rejects (never an exception from inside the solve).
        return jnp.where(ok & jnp.all(jnp.isfinite(r)), r, jnp.nan)


def _check_data(problem, params) -> None:
    data = problem.data
    prediction, _ = jax.eval_shape(problem.predict, params)
    shapes = [x.shape for x in jax.tree.leaves(prediction)]
    data_shapes = [jnp.shape(x) for x in jax.tree.leaves(data)]
    if jax.tree.structure(prediction) != jax.tree.structure(data) or (
        shapes != data_shapes
    ):
        raise ValueError(
            "fit: observe(traj, params) must return a pytree like `data` (with a "
            "leading experiments axis if experiments= is given); it returned "
            f"{jax.tree.structure(prediction)} with shapes {shapes}, data is "
            f"{jax.tree.structure(data)} with shapes {data_shapes}."
        )


def _loss(problem, z, loss):
    prediction, ok = problem.predict(problem.from_free(z))
    return jnp.where(ok, loss(prediction, problem.data), jnp.inf)


@eqx.filter_jit
def _residuals_and_jacobian(problem, z, jac):
    jacobian = jax.jacfwd if jac == "fwd" else jax.jacrev
    return problem.residuals(z), jacobian(problem.residuals)(z)


def _statistics(r, jac_z, z, fitted_log, sigma_given, fitted):
    """Residual norm, Gauss-Newton step, covariance and standard errors at z, from
    the residuals and their Jacobian there (in the free coordinates z)."""
    r = np.asarray(r)
    leaves = jax.tree.leaves(jac_z)  # a matrix, or one (N, *shape) per leaf of z
    jac = np.concatenate([np.asarray(j).reshape(r.size, -1) for j in leaves], axis=1)
    # d z / d theta: 1 / theta for parameters fitted in log space.
    scale = np.concatenate(
        [
            np.ravel(np.where(log, np.exp(np.asarray(x)), 1.0) * np.ones(np.shape(x)))
            for x, log in zip(
                jax.tree.leaves(z), jax.tree.leaves(fitted_log), strict=True
            )
        ]
    )
    jac_theta = jac / scale
    norm_r = float(np.linalg.norm(r))
    num, p = jac.shape
    variance = 1.0 if sigma_given else norm_r**2 / max(num - p, 1)
    if np.all(np.isfinite(jac)) and np.all(np.isfinite(r)):
        step = np.abs(np.linalg.lstsq(jac, r, rcond=None)[0])
        newton_step = float(np.max(step, initial=0.0))
        # The same step in standard errors (of z): with noisy data, a step of a
        # hundredth of a standard error is stationary enough, and finer ones are
        # below what the simulation's own error lets the loss resolve.
        spread = np.sqrt(variance * np.diag(np.linalg.pinv(jac.T @ jac)))
        with np.errstate(divide="ignore", invalid="ignore"):
            in_stderr = float(np.max(np.where(step > 0, step / spread, 0.0)))
    else:
        newton_step = in_stderr = float("inf")
    u, s, vt = np.linalg.svd(jac_theta, full_matrices=False)
    keep = s > s.max(initial=0.0) * max(num, p) * np.finfo(float).eps
    v = vt.T
    covariance = variance * (v[:, keep] / s[keep] ** 2) @ v[:, keep].T
    # A direction the data cannot see: the parameters in it are undetermined.
    blind = np.any(np.abs(v[:, ~keep]) > 1e-8, axis=1)
    covariance[blind, :] = np.inf
    covariance[:, blind] = np.inf
    stderr = np.sqrt(np.diag(covariance))
    names = []
    values = []
    offset = 0
    for path, x in jax.tree_util.tree_leaves_with_path(z):
        size = int(np.size(x))
        key = jax.tree_util.keystr(path)
        key = key[2:-2] if key.startswith("['") and key.endswith("']") else key
        names += [key] if np.ndim(x) == 0 else [f"{key}[{i}]" for i in range(size)]
        values.append(stderr[offset : offset + size].reshape(np.shape(x)))
        offset += size
    stderr_tree = jax.tree.unflatten(jax.tree.structure(fitted), values)
    return dict(
        residual_norm=norm_r,
        dof=max(num - p, 1),
        newton_step=newton_step,
        newton_step_in_stderr=in_stderr,
        covariance=covariance,
        stderr=stderr_tree,
        names=names,
    )


def _minimize(objective, z, optimizer, max_steps, rtol, progress, every):
    """The optax path: gradient steps on the loss, stopped when it levels off."""
    optimizer = optax.with_extra_args_support(
        optax.lbfgs() if optimizer is None else optimizer
    )
    # Weakly typed leaves (from Python floats) turn strong after one update, which
    # would compile the step twice more: make them strong from the start.
    state = _strongly_typed(optimizer.init(z))
    if _stores_value(state):
        value_and_grad = optax.value_and_grad_from_state(objective)
    else:

        def value_and_grad(z, *, state):
            del state
            return jax.value_and_grad(objective)(z)

    @eqx.filter_jit
    def step(z, state):
        value, grad = value_and_grad(z, state=state)
        updates, state = optimizer.update(
            grad, state, z, value=value, grad=grad, value_fn=objective
        )
        return optax.apply_updates(z, updates), state, value

    start = time.perf_counter()
    history: list[float] = []
    message = f"max_steps = {max_steps} reached"
    converged = False
    for k in range(max_steps):
        z, state, value = step(z, state)
        history.append(float(value))
        if not np.isfinite(history[-1]):
            message = "the loss became non-finite: lower the learning rate"
            break
        if progress and k % every == 0:
            elapsed = time.perf_counter() - start
            print(
                f"fit: step {k:4d}  loss {history[-1]:.6e}  ({elapsed:.1f} s)",
                flush=True,
            )
        if len(history) > 3:
            recent = np.abs(np.diff(history[-4:]))
            if np.all(recent <= rtol * abs(history[-1])):
                converged = True
                message = f"loss changed by < rtol = {rtol:g} in three steps"
                break
    if _stores_value(state):  # the line search left the loss at z in the state
        final = float(optax.tree.get(state, "value"))
    else:
        final = float(jax.jit(objective)(z))
    history.append(final)
    return z, np.asarray(history), len(history) - 1, converged, message


def _strongly_typed(tree):
    return jax.tree.map(
        lambda x: jnp.array(x, dtype=x.dtype) if eqx.is_array(x) else x, tree
    )


def _stores_value(state) -> bool:
    try:
        return optax.tree.get(state, "value") is not None
    except (KeyError, ValueError):
        return False
