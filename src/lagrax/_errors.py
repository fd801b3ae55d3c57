"""Raising a failed result code, naming the failed members of a batch.

Where a compiled program's result comes back to Python, its codes are checked
there ([`check_result`][]): the program then holds no host callback, and XLA's
persistent compilation cache, which refuses programs with callbacks, can keep it
(a re-run script compiles nothing again).

Under a caller's own trace (jit, vmap) the check is compiled in: one host
callback that sees the codes of the whole batch (`vmap_method="expand_dims"`,
where `equinox.error_if` under `jax.vmap` raises the message of one failed member
and cannot say which), behind a `lax.cond` on "any member failed" that stays a
branch under vmap (equinox's `unvmap_any`): nothing runs on the host unless
something failed.
"""

import contextlib
import contextvars
import functools
import os

import equinox as eqx
import equinox._errors as eqx_errors
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from ._results import RESULTS, is_failure, result_names


def check_result(x, result: RESULTS, throw: bool):
    """Raise the message of `result` if it is a failure and `throw`; return `x`.

    `result` concrete (the output of a compiled program, back in Python): the
    check is made here, on the host, and the program holds none. Traced (under
    the caller's own jit or vmap): the check is compiled into the caller's
    program, threaded through `x` so that it runs before `x` is used; under
    `jax.vmap` the message lists the indices of the failed members.
    """
    if not throw:
        return x
    if not isinstance(result._value, jax.core.Tracer):
        raise_if_failed(result._value)
        return x
    dynamic, static = eqx.partition(x, eqx.is_array)
    dynamic = _checked(dynamic, result._value)
    return eqx.combine(dynamic, static)


@eqx.filter_custom_jvp
def _checked(x, codes):
    struct = jax.eval_shape(lambda: x)

    def fail():
        return jax.pure_callback(_raise, struct, codes, vmap_method="expand_dims")

    failed = is_failure(_wrap(codes))
    return jax.lax.cond(eqxi.unvmap_any(failed), fail, lambda: x)


@_checked.def_jvp
def _checked_jvp(primals, tangents):
    # The check is not differentiated: the tangents pass through unchanged.
    x, codes = primals
    t_x, _ = tangents
    return _checked(x, codes), t_x


def _wrap(codes):
    return eqx.tree_at(lambda r: r._value, RESULTS.successful, codes)


def failure_message(codes) -> str:
    """The message for result codes: one code, or a batch of them by member."""
    codes = np.asarray(codes)
    names = result_names(_wrap(codes))
    failed = (names != "successful") & (names != "event_occurred")
    if codes.ndim == 0:
        return RESULTS[_wrap(codes)]
    members = np.argwhere(failed)
    lines = [
        f"{len(members)} of {failed.size} members of the batch failed "
        "(with throw=False, sol.failed and sol.status list them; sol[i] is member i):"
    ]
    for name in dict.fromkeys(names[failed]):
        where = [
            tuple(int(i) for i in idx) if codes.ndim > 1 else int(idx[0])
            for idx in members
            if names[tuple(idx)] == name
        ]
        shown = ", ".join(map(str, where[:20])) + (", ..." if len(where) > 20 else "")
        message = RESULTS[getattr(RESULTS, name)]
        lines.append(f"- {name} at members [{shown}]: {message}")
    return "\n".join(lines)


def raise_if_failed(codes) -> None:
    """On the host: raise the message of result codes (one, or a batch's, by
    member) if any is a failure."""
    codes = np.asarray(codes)
    if np.any(np.asarray(is_failure(_wrap(codes)))):
        # The class equinox raises its runtime errors as, so that code catching
        # those catches these, whether checked on the host or in a program.
        raise getattr(eqx, "EquinoxRuntimeError", RuntimeError)(failure_message(codes))


def _raise(codes):
    message = failure_message(codes)
    # Raised the way equinox raises its own runtime errors, so that
    # `equinox.filter_jit` shows this message instead of XLA's wrapping of it.
    try:
        from equinox import _errors, _jit

        _jit.last_error_info = (message, [])
        error = _errors._EquinoxRuntimeError
    except (ImportError, AttributeError):
        error = RuntimeError
    raise error(message)


_NAN_CHECKS = contextvars.ContextVar("lagrax_nan_checks", default=False)


@contextlib.contextmanager
def checks_as_nan():
    """Within, at trace time and in this thread: equinox's runtime checks
    (`eqx.error_if`, in diffrax, lineax and optimistix, and in the user's own
    functions) that would raise by default return NaN where they fail instead,
    without the host callback that XLA's persistent cache refuses.

    For programs that report their failures by result codes: inside `simulate`,
    diffrax's checks of t0, t1, ts and dt0 are those of `valid_arguments`, whose
    invalid values never reach diffrax, and a NaN anywhere else becomes a named
    result code (`nonfinite_terms`, `nonfinite_step`). An EQX_ON_ERROR set in the
    environment (`raise`, or `breakpoint` to debug) is left in force.

    Equinox resolves a check's default behaviour while tracing it, in a compiled
    function whose cache does not know that setting; so rather than switch the
    setting, the checks traced here go to a compiled function of their own
    (never shared with checks traced elsewhere, in any thread).
    """
    if "EQX_ON_ERROR" in os.environ or not _divert_checks():
        yield
        return
    token = _NAN_CHECKS.set(True)
    try:
        yield
    finally:
        _NAN_CHECKS.reset(token)


@functools.cache
def _divert_checks() -> bool:
    """Route equinox's compiled check through `_check` (once per process): the
    original function, untouched, outside `checks_as_nan`. False where this
    equinox has no such function (then nothing changes; programs keep their
    callbacks). Two threads that race here wrap it twice, to the same effect."""
    original = getattr(eqx_errors, "branched_error_if_impl_jit", None)
    impl = getattr(eqx_errors, "branched_error_if_impl", None)
    if original is None or impl is None:
        return False

    def as_nan(x, pred, index, msgs, *, on_error):
        on_error = "nan" if on_error == "default" else on_error
        return impl(x, pred, index, msgs, on_error=on_error)

    as_nan_jit = eqx.filter_jit(as_nan)

    def _check(x, pred, index, msgs, *, on_error):
        if _NAN_CHECKS.get():
            return as_nan_jit(x, pred, index, msgs, on_error=on_error)
        return original(x, pred, index, msgs, on_error=on_error)

    eqx_errors.branched_error_if_impl_jit = _check
    return True


def any_failed(result: RESULTS) -> jax.Array:
    """Whether `result` (of any batch shape) holds a failure."""
    return jnp.any(is_failure(result))


_NAN_ON_FAILURE = contextvars.ContextVar("lagrax_nan_on_failure", default=False)


@contextlib.contextmanager
def nan_on_failure():
    """Within: functions whose failure is checked outside any cached compiled
    program ([`lagrax.consistent_state`][]) return NaN where they failed instead
    of raising, whatever their `throw`. For optimisers, which must reject a trial
    point the model cannot be evaluated at, not crash on it. Read at trace time."""
    token = _NAN_ON_FAILURE.set(True)
    try:
        yield
    finally:
        _NAN_ON_FAILURE.reset(token)


def failures_are_nan() -> bool:
    """Whether [`nan_on_failure`][] is in effect."""
    return _NAN_ON_FAILURE.get()
