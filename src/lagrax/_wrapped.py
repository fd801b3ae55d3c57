"""The diffrax solver `simulate` integrates with: the user's solver, wrapped so
that each step is projected (if the stabilization projects) and so that the
solve ends at the first step that cannot be taken."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Real

from ._inputs import all_finite
from ._projection import ManifoldProjector


# The code the guard ends a solve with; `simulate` turns it into lagrax's own
# (`step_size_collapsed`, `nonfinite_step`) after the solve.
STOPPED = dfx.RESULTS.dt_min_reached


class GuardedSolver(dfx.AbstractWrappedSolver):
    """Wraps a diffrax solver: projects each step, and ends a solve that is stuck.

    In the style of diffrax's own wrapped solvers (`HalfSolver`): the inner solver
    takes the step and estimates its error as usual, and is this solver in every
    other respect. One wrapper, not one per job: diffrax forwards its `isinstance`
    checks (implicit? adaptive?) through one level of wrapping only.

    Projection: y1 = (q1, qd1) goes through `projector` (the stabilization's), and
    the inner solver's state is re-initialized at the projected point, so a
    first-same-as-last solver does not reuse the vector field of the unprojected
    state.

    The guard: a vector field that fails (NaN terms, a singular saddle system)
    returns NaN. An adaptive controller rejects such a step and retries a shorter
    one, which is right when a trial stage overshot into a region where the model
    is not defined; but when the step has fallen to round-off of the time, no step
    can succeed, and without the guard the solve would spend its whole step
    budget there. With fixed steps a non-finite step cannot be retried at all. A
    start that already failed its checks (`failed_start`) ends at the first step.
    Ending means: the step is accepted with y1 = y0 (finite, so that the step-size
    controller accepts it) and the result `STOPPED`; diffrax then stops, and the
    last state reached is the one saved.
    """

    solver: dfx.AbstractSolver
    projector: ManifoldProjector | None
    failed_start: Bool[Array, ""]
    time_scale: Real[Array, ""]
    adaptive: bool = eqx.field(static=True)

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def scan_kind(self):
        # diffrax's DirectAdjoint and forward-mode autodiff set the Runge-Kutta
        # stage loop through this attribute.
        return self.solver.scan_kind  # pyright: ignore

    @property
    def root_finder(self):
        # diffrax fills an implicit solver's tolerances in through this attribute;
        # forwarding it lets the wrapped implicit solver take them.
        return self.solver.root_finder  # pyright: ignore

    @property
    def interpolation_cls(self):  # pyright: ignore
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        if self.projector is not None:
            y1 = self.projector(t1, *y1, args)
            solver_state = self.solver.init(terms, t1, t1 + (t1 - t0), y1, args)
        finite = all_finite((y1, y_error))
        if self.adaptive:
            eps = jnp.finfo(jnp.result_type(t0)).eps
            collapsed = jnp.abs(t1 - t0) <= 64 * eps * self.time_scale
            stop = self.failed_start | (~finite & collapsed)
        else:
            stop = self.failed_start | ~finite
        y1 = jax.tree.map(lambda a, b: jnp.where(stop, b, a), y1, y0)
        if y_error is not None:
            y_error = jax.tree.map(lambda e: jnp.where(stop, 0, e), y_error)
        result = dfx.RESULTS.where(stop, STOPPED, result)
        return y1, y_error, dense_info, solver_state, result
