"""Result codes of lagrax: diffrax's, plus the failures of constrained mechanics."""

import diffrax as dfx


class RESULTS(dfx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """Why a solve stopped. `RESULTS.successful` when it did not fail.

    Extends `diffrax.RESULTS`, so every diffrax code can be promoted to it.
    """

    redundant_constraints = (
        "redundant constraints: the constraint Jacobian J = dphi/dq is rank "
        "deficient, so the multipliers are not unique. Remove the dependent "
        "constraints, or pass saddle_solver=lx.LeastSquares() for the minimal-norm "
        "multipliers."
    )
    mass_matrix_not_positive_definite = (
        "the mass matrix M = d2L/dqd2 is not positive definite: check the kinetic "
        "energy in the Lagrangian (every coordinate needs inertia), or pass "
        "saddle_solver=lx.DenseLU() if M is singular by design but positive "
        "definite on the constraint tangent space."
    )
    singular_saddle_matrix = (
        "the saddle-point (KKT) matrix [[M, -J^T], [J, 0]] is singular: redundant "
        "constraints (pass saddle_solver=lx.LeastSquares()) or a mass matrix that "
        "is singular on the constraint tangent space."
    )
    max_steps = (
        "max_steps reached before t1: raise max_steps, or loosen rtol/atol (a stiff "
        "system may need an implicit solver such as diffrax.Kvaerno5())."
    )
    inconsistent_initial_state = (
        "the initial state is not consistent with the constraints: |phi(t0, q0)|, "
        "|J qd0 + phi_t| or |A qd0 + b| exceeds initial_tol. Call "
        "lx.consistent_state(system, q0, qd0, params) first, or pass "
        "project_initial=True to simulate."
    )
    initial_projection_failed = (
        "project_initial: no state satisfying the constraints was found near (q0, "
        "qd0). Give a closer guess, or call lx.consistent_state(system, q0, qd0, "
        "params) outside jit to see the residuals it reaches."
    )
    nonfinite_inputs = (
        "NaN or inf in q0, qd0 or params: check the inputs (a parameter from a "
        "fit that diverged, an uninitialized array, a division by zero upstream)."
    )
    nonfinite_terms = (
        "the equations of motion evaluated to NaN or inf (mass matrix, forces, "
        "constraint Jacobian or gamma) at a state the solver reached: look for a "
        "division by zero, the sqrt or log of a negative number, or arctan2(0, 0) in "
        "the Lagrangian, the constraints or the forces."
    )
    velocity_constraints_not_affine = (
        "System.velocity_constraints is not affine in qd at the initial state: "
        "psi(t, q, qd) must be A(t, q) qd + b(t, q) (a Pfaffian constraint), as "
        "lagrax solves A qdd = -(psi_t + psi_q qd). Write it as a linear function of "
        "qd (e.g. a dot product with qd, no |qd| or qd**2)."
    )
