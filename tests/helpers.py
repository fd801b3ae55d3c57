"""Independent reference solutions, written without lagrax."""

import numpy as np
from scipy.integrate import solve_ivp


def solve_reference(rhs, y0, t_eval, rtol=1e-13, atol=1e-13):
    """Integrate a first-order ODE with scipy's DOP853 to near round-off."""
    sol = solve_ivp(
        rhs,
        (t_eval[0], t_eval[-1]),
        np.asarray(y0, dtype=float),
        method="DOP853",
        t_eval=t_eval,
        rtol=rtol,
        atol=atol,
    )
    assert sol.success, sol.message
    return sol.y.T
