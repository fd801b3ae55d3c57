"""An optimistix least-squares solver driven step by step, with a loss history
and a progress line, in one compiled loop."""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx


def least_squares(
    problem, solver, y0, *, max_steps, jac, rtol, atol, progress, print_every
):
    """Minimize sum(problem.residuals(y)^2) with `solver` from y0.

    The loop is optimistix's own iteration (init, step, terminate), written out so
    that it also records the loss of the accepted point after every step and
    prints progress. Returns (y, history (max_steps + 1,), steps, terminated,
    message) and (residuals, Jacobian) at y.
    """
    started[0] = time.perf_counter()
    y, history, steps, terminated, code, r, jacobian = _solve(
        problem, solver, y0, max_steps, jac, rtol, atol,
        print_every if progress else 0,
    )  # fmt: skip
    code = int(code)
    if bool(terminated):
        message = "converged: the last step was below atol + rtol |z|"
    elif code == _BAD_START:
        message = (
            "the model cannot be evaluated at the starting parameters (non-finite "
            "residuals: the initial state or the simulation failed there)"
        )
    elif code != _RUNNING:
        message = f"the solver stopped: {optx.RESULTS[_result(code)]}"
    else:
        message = f"max_steps = {max_steps} reached"
    out = y, np.asarray(history), int(steps), bool(terminated), message
    return out, (np.asarray(r), np.asarray(jacobian))


_RUNNING, _BAD_START = -1, -2
started = [0.0]  # when the running solve began, for the progress lines


def report(step, loss, every, *violation) -> None:
    """The progress line of a fit every `every` steps (from a host callback);
    with multiple shooting, the continuity violation too."""
    if int(step) % int(every) == 0:
        elapsed = time.perf_counter() - started[0]
        extra = f"  continuity {float(violation[0]):.1e}" if violation else ""
        print(
            f"fit: step {int(step):4d}  loss {float(loss):.6e}{extra}  "
            f"({elapsed:.1f} s)",
            flush=True,
        )


def _result(code: int) -> optx.RESULTS:
    return eqx.tree_at(lambda r: r._value, optx.RESULTS.successful, jnp.asarray(code))


@eqx.filter_jit
def _solve(problem, solver, y0, max_steps, jac, rtol, atol, every):
    # A module-level function of the problem (a pytree), no closure: a second
    # fit of the same model and shapes reuses this compiled solve.
    options = {"jac": jac}
    args = problem
    tags = frozenset()

    def fn(y, args):
        return args.residuals(y), None

    f_struct, aux_struct = jax.eval_shape(lambda: fn(y0, args))
    state = solver.init(fn, y0, args, options, f_struct, aux_struct, tags)
    dynamic, static = eqx.partition(state, eqx.is_array)
    dtype = f_struct.dtype
    history = jnp.full(max_steps + 1, jnp.nan, dtype)

    def cond(carry):
        _, step, _, _, terminate, code = carry
        return ~terminate & (code == _RUNNING) & (step < max_steps)

    def body(carry):
        y_old, step, dynamic, history, _, _ = carry
        state = eqx.combine(static, dynamic)
        # The first step evaluates y0 (accepted as it is); each later one a trial
        # point, accepted or rejected by the solver's search.
        y, state, _ = solver.step(fn, y_old, args, options, state, tags)
        _, result = solver.terminate(fn, y, args, options, state, tags)
        loss = jnp.sum(state.f_info.residual**2)  # at the accepted point
        # MINPACK's step test (More, Garbow & Hillstrom 1980) on an accepted
        # step: below atol + rtol |y|. (optimistix's own test also asks each
        # residual to stop changing relative to itself, which residuals near
        # zero never do.) The gradient test follows at the end.
        change = _max_abs(jax.tree.map(lambda a, b: a - b, y, y_old))
        accepted = (step > 0) & (change > 0)
        terminate = accepted & (change <= atol + rtol * _max_abs(y))
        code = jnp.where(result == optx.RESULTS.successful, _RUNNING, result._value)
        code = jnp.where((step == 0) & ~jnp.isfinite(loss), _BAD_START, code)
        history = jnp.where(step == 0, history.at[0].set(loss), history)
        history = history.at[step + 1].set(loss)
        if every:
            jax.debug.callback(report, step, loss, every)
        dynamic, _ = eqx.partition(state, eqx.is_array)
        return y, step + 1, dynamic, history, terminate, code

    init = (y0, jnp.array(0), dynamic, history, jnp.array(False), jnp.array(_RUNNING))
    y, steps, dynamic, history, terminate, code = jax.lax.while_loop(cond, body, init)
    # The residuals and their Jacobian at the accepted point, for the statistics.
    info = eqx.combine(static, dynamic).f_info
    jac = info.jac.as_matrix()
    return y, history, steps, terminate & (code == _RUNNING), code, info.residual, jac


def _max_abs(tree):
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in jax.tree.leaves(tree)]))


def residual_vector(prediction, data, sigma) -> jax.Array:
    """(prediction - data) / scale for every leaf, raveled and concatenated; scale
    is sigma, or where sigma is None the leaf's root mean square times
    sqrt(size)."""

    def leaf(p, d, s):
        if s is None:
            d = jnp.asarray(d)
            s = jnp.sqrt(d.size * jnp.mean(d**2) + jnp.finfo(d.dtype).tiny)
        return jnp.ravel((p - d) / s)

    if sigma is None:
        sigma = jax.tree.map(lambda _: None, data)
    leaves = jax.tree.leaves(
        jax.tree.map(leaf, prediction, data, sigma, is_leaf=lambda x: x is None)
    )
    return jnp.concatenate(leaves)
