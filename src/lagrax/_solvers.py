"""ODE solvers that diffrax does not ship, for `simulate`'s `solver`."""

import diffrax as dfx
import numpy as np


class RK4(dfx.AbstractERK):
    """The classical fourth-order Runge-Kutta method: MuJoCo's `mjINT_RK4`, the
    integrator to compare with MuJoCo step for step (1000 RK4 steps of
    gymnasium's ant equal MuJoCo's `mj_step`, tests/test_tree.py).

    Fixed steps only: it has no error estimate. [`lagrax.simulate`][] takes
    fixed steps with it by default (`diffrax.ConstantStepSize()`: ceil((t1 -
    t0) / dt0) steps); an adaptive step-size controller is refused (diffrax
    raises that the solver "does not provide error estimates"), unless it
    wraps it in `diffrax.HalfSolver`. For adaptive steps, `diffrax.Dopri8()`
    (the default) or `diffrax.Tsit5()`.

    Between steps (values saved at `ts` inside a step, events), y is RK4's
    third-order continuous extension y0 + sum_i b_i(theta) k_i (Hairer, Norsett
    & Wanner, *Solving ODEs I*, II.6), which is exactly diffrax's cubic Hermite
    interpolation from the first and last stages: with y1 - y0 = (k1 + 2 k2 +
    2 k3 + k4) / 6, their coefficients of theta^2 and theta^3 agree.
    """

    tableau = dfx.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls = dfx.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, _, dense_info, solver_state, result = super().step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        # No error estimate (the tableau's b_error is only a placeholder): an
        # adaptive controller fed zeros would grow the step without bound.
        return y1, None, dense_info, solver_state, result
