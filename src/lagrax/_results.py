"""Result codes of lagrax: diffrax's, plus the failures of constrained mechanics."""

import warnings

import diffrax as dfx
import numpy as np


# diffrax's `successful` has an empty message; lagrax prints it as a word. The
# enumeration warns when a subclass gives an inherited item another message.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")

    class RESULTS(dfx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
        """Why a solve stopped. `RESULTS.successful` when it did not fail.

        Extends `diffrax.RESULTS`, so every diffrax code can be promoted to it.
        `lx.RESULTS[sol.result]` is the message (with the fix); `sol.status` the
        short name, per member of a batch.
        """

        successful = "successful"
        redundant_constraints = (
            "redundant constraints: the constraint Jacobian J = dphi/dq is rank "
            "deficient at the initial state, so the multipliers are not unique. "
            "Remove the dependent constraints, or pass "
            "saddle_solver=lx.LeastSquares() for the minimal-norm multipliers; if "
            "J loses rank at this configuration only (a mechanism started at a "
            "singular configuration), pass lx.SingularLimit()."
        )
        singular_configuration = (
            "singular configuration: the constraint Jacobian J = dphi/dq lost rank "
            "during the motion (links aligned, a dead point or change point of a "
            "linkage), where the constraints no longer determine the accelerations "
            "and the constraint forces grow without bound. The run stops just "
            "before it. Pass saddle_solver=lx.SingularLimit() (the physical "
            "accelerations at and near the instant) or lx.AugmentedLagrangian() "
            "to continue through it on the physical branch, or change the "
            "parameters or the start so that the motion avoids it."
        )
        mass_matrix_not_positive_definite = (
            "the mass matrix M = d2L/dqd2 is not positive definite: check the "
            "kinetic energy in the Lagrangian (every coordinate needs inertia: a "
            "body of zero mass or inertia has none), or pass "
            "saddle_solver=lx.AugmentedLagrangian() (or lx.DenseLU()) if M is "
            "singular by design but positive definite on the constraint tangent "
            "space."
        )
        singular_saddle_matrix = (
            "the saddle-point (KKT) matrix [[M, -J^T], [J, 0]] is singular: "
            "redundant constraints (pass saddle_solver=lx.AugmentedLagrangian() or "
            "lx.LeastSquares()) or a mass matrix that is singular on the constraint "
            "tangent space."
        )
        max_steps = (
            "max_steps reached before t1: raise max_steps, or loosen rtol/atol (a "
            "stiff system may need an implicit solver such as diffrax.Kvaerno5())."
        )
        step_size_collapsed = (
            "the step size fell to round-off: the equations of motion cannot be "
            "continued past the last state reached (they turn NaN or inf, or the "
            "saddle system singular, just beyond it; or the forces jump there). "
            "Look at the model near that state: a sqrt or log of a quantity that "
            "changes sign, a division by a distance that reaches zero."
        )
        nonfinite_step = (
            "a step of the integrator gave NaN or inf, and fixed steps cannot be "
            "retried smaller: lower the step (dt0; solver.dt in a config), or use "
            "adaptive steps; if the model fails just past the last state reached, "
            "look there for a sqrt or log of a quantity that changes sign."
        )
        invalid_arguments = (
            "invalid arguments (traced under jit, so not refused up front): t0, "
            "t1, ts, dt0, rtol or atol is NaN or inf, rtol or atol is not > 0, dt0 "
            "is zero or points away from t1, or ts does not run from t0 to t1. Pass "
            "finite times with t0 <= ts[0] <= ... <= ts[-1] <= t1."
        )
        inconsistent_initial_state = (
            "the initial state is not consistent with the constraints: |phi(t0, "
            "q0)|, |J qd0 + phi_t| or |A qd0 + b| exceeds initial_tol. Call "
            "lx.consistent_state(system, q0, qd0, params) first, or pass "
            "project_initial=True to simulate."
        )
        initial_projection_failed = (
            "project_initial: no state satisfying the constraints was found near "
            "(q0, qd0). Give a closer guess, or call lx.consistent_state(system, "
            "q0, qd0, params) outside jit to see the residuals it reaches."
        )
        nonfinite_inputs = (
            "NaN or inf in q0, qd0 or params: check the inputs (a parameter from a "
            "fit that diverged, an uninitialized array, a division by zero "
            "upstream)."
        )
        nonfinite_terms = (
            "the equations of motion evaluated to NaN or inf (mass matrix, forces, "
            "constraint Jacobian or gamma) at a state the solver reached: look for "
            "a division by zero, the sqrt or log of a negative number, or "
            "arctan2(0, 0) in the Lagrangian, the constraints or the forces."
        )
        velocity_constraints_not_affine = (
            "System.velocity_constraints is not affine in qd at the initial state: "
            "psi(t, q, qd) must be A(t, q) qd + b(t, q) (a Pfaffian constraint), "
            "as lagrax solves A qdd = -(psi_t + psi_q qd). Write it as a linear "
            "function of qd (e.g. a dot product with qd, no |qd| or qd**2)."
        )


RESULTS.__module__ = "lagrax"

_NAMES = {int(item._value): name for name, item in RESULTS._name_to_item.items()}


def result_names(result: RESULTS) -> np.ndarray:
    """The names of the codes in `result` ('successful', 'max_steps', ...), as a
    NumPy array of strings of the shape of its value (one per member of a batch)."""
    values = np.asarray(result._value)
    return np.vectorize(_NAMES.__getitem__, otypes=[object])(values).astype(str)


def is_failure(result: RESULTS):
    """True where `result` is a failure: anything but successful or an event."""
    return (result != RESULTS.successful) & (result != RESULTS.event_occurred)
