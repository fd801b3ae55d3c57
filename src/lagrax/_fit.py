"""`fit`: physical parameters from observed trajectories, by gradient descent."""

import time
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, PyTree

from ._custom_types import Params
from ._inputs import coerce_params
from ._simulate import simulate
from ._system import System
from ._trajectory import Trajectory


class FitResult(eqx.Module):
    """What [`lagrax.fit`][] found.

    **Fields:**

    - `params`: all parameters, the fitted ones at their optimum.
    - `loss`: the final loss.
    - `loss_history`: the loss before each step and after the last, (steps + 1,).
    - `steps`: optimizer steps taken.
    - `converged`: whether a stopping criterion was met before `max_steps`.
    - `message`: why it stopped.
    """

    params: Params
    loss: float
    loss_history: np.ndarray
    steps: int
    converged: bool
    message: str


def relative_squared_error(prediction: PyTree, data: PyTree) -> Array:
    """sum over the leaves of mean((prediction - data)^2) / mean(data^2).

    Each observed quantity is scaled by its own magnitude, so positions in metres
    and forces in newtons can be fitted together.
    """

    def leaf(p, d):
        scale = jnp.mean(d**2) + jnp.finfo(jnp.result_type(d)).tiny
        return jnp.mean((p - d) ** 2) / scale

    return sum(jax.tree.leaves(jax.tree.map(leaf, prediction, data)))


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
    loss: Callable[[PyTree, PyTree], Array] = relative_squared_error,
    optimizer: optax.GradientTransformation | None = None,
    max_steps: int = 200,
    rtol: float = 1e-6,
    progress: bool = True,
    print_every: int = 10,
    **simulate_kwargs: Any,
) -> FitResult:
    """Fit parameters of a system so that its simulation matches observed data.

    Minimizes `loss(observe(simulate(system, q0, qd0, params, ts=ts), params),
    data)` over the chosen parameters with an optax optimizer, differentiating
    through the whole trajectory. The observation is any function of the
    [`lagrax.Trajectory`][]: coordinates, a marker point, an energy, or the
    constraint forces (`traj.multipliers`), which makes measured joint reactions
    usable as data.

    **Arguments:**

    - `system`: the [`lagrax.System`][].
    - `params`: the starting parameters (the fitted ones are initial guesses).
    - `observe`: `observe(traj, params) -> prediction`, a pytree like `data`.
    - `data`: the observations at the times `ts`.
    - `ts`: observation times; the simulation runs from `ts[0]` (or `t0=`) to
        `ts[-1]`.
    - `initial_state`: `(q0, qd0)`, or a function `params -> (q0, qd0)` when the
        start depends on fitted parameters (e.g. `model.initial_state`); gradients
        flow through [`lagrax.consistent_state`][].
    - `fit`: the parameters to fit: names (for a dict of parameters) or a pytree
        of bools; default every floating-point leaf.
    - `positive`: parameters fitted in log space, so they stay positive.
    - `loss`: `loss(prediction, data) -> scalar`; default
        [`lagrax.relative_squared_error`][].
    - `optimizer`: any optax optimizer; default `optax.lbfgs()` (with a line
        search: few steps on these smooth, deterministic problems).
    - `max_steps`: optimizer steps at most.
    - `rtol`: stop when the loss changed by less than `rtol` times itself in each
        of three consecutive steps (with noisy data the loss levels off at the
        noise; 1e-6 of it leaves the parameters converged to about 1e-3).
    - `progress`: print the loss every `print_every` steps and a summary.
    - `**simulate_kwargs`: passed to [`lagrax.simulate`][] (solver, tolerances,
        stabilization, ...).

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

    fitted_log = eqx.filter(log_mask, fit_mask)  # the structure of `fitted`

    def to_free(p):
        return jax.tree.map(lambda x, log: jnp.log(x) if log else x, p, fitted_log)

    def from_free(z):
        values = jax.tree.map(lambda x, log: jnp.exp(x) if log else x, z, fitted_log)
        return eqx.combine(values, frozen)

    simulate_kwargs.setdefault("t0", ts[0])

    def objective(z):
        p = from_free(z)
        q0, qd0 = initial_state(p) if callable(initial_state) else initial_state
        traj = simulate(system, q0, qd0, p, t1=ts[-1], ts=ts, **simulate_kwargs)
        return loss(observe(traj, p), data)

    optimizer = optax.with_extra_args_support(
        optax.lbfgs() if optimizer is None else optimizer
    )
    # Weakly typed leaves (from Python floats) turn strong after one update, which
    # would compile the step twice more: make them strong from the start.
    z = _strongly_typed(to_free(fitted))
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
        if progress and k % print_every == 0:
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
    result = FitResult(
        params=from_free(z),
        loss=final,
        loss_history=np.asarray(history),
        steps=len(history) - 1,
        converged=converged,
        message=message,
    )
    if progress:
        print(
            f"fit: {result.steps} steps in {time.perf_counter() - start:.1f} s, "
            f"loss {history[0]:.3e} -> {final:.3e} ({message})",
            flush=True,
        )
    return result


def _strongly_typed(tree):
    return jax.tree.map(
        lambda x: jnp.array(x, dtype=x.dtype) if eqx.is_array(x) else x, tree
    )


def _stores_value(state) -> bool:
    try:
        return optax.tree.get(state, "value") is not None
    except (KeyError, ValueError):
        return False
