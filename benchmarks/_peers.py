"""The peers, written as a user would write them by hand.

For each problem: the mass matrix M, the applied forces f, the constraint
Jacobian J and the acceleration-level remainder g (so that the constraints
differentiated twice read J q'' + g = 0), derived on paper and written out once
in NumPy and once in jax.numpy. Sign convention as lagrax: M q'' = f + J^T lam.

Problems: the Cartesian pendulum (n = 2, m = 1), the car axis of the IVP Test
Set (n = 4, m = 2, a time-dependent constraint) and a point-mass double pendulum
in Cartesian coordinates (n = 4, m = 2) for the batch benchmark. Problems too
long to derive by hand (Andrews, lagrax's double pendulum with rotational
inertia) get their terms from SymPy (`_sympy_peer.py`). Each peer takes the
`terms(xp, t, q, v, p)` function of its problem.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp


# -- the equations, generic in the array module `xp` (numpy or jax.numpy) -------


def rk4(f, state, arg, h, substeps):
    """`substeps` classical RK4 steps of size h of y' = f(y, arg): for CasADi
    symbols as for arrays (only + and * are used)."""
    for _ in range(substeps):
        k1 = f(state, arg)
        k2 = f(state + h / 2 * k1, arg)
        k3 = f(state + h / 2 * k2, arg)
        k4 = f(state + h * k3, arg)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return state


def pendulum_terms(xp, t, q, v, p):
    m, g, l = p["m"], p["g"], p["l"]
    M = m * xp.eye(2)
    f = xp.stack([0.0 * q[0], -m * g + 0.0 * q[1]])
    J = 2 * q[None, :]
    gamma = xp.stack([2 * v @ v])
    del l
    return M, f, J, gamma


def car_axis_terms(xp, t, q, v, p):
    xl, yl, xr, yr = q[0], q[1], q[2], q[3]
    eps, Mass, L, L0, r, w, g = (p[k] for k in ("eps", "M", "L", "L0", "r", "w", "g"))
    k = Mass * eps**2 / 2
    yb = r * xp.sin(w * t)
    ybd = r * w * xp.cos(w * t)
    ybdd = -r * w**2 * xp.sin(w * t)
    xb = xp.sqrt(L**2 - yb**2)
    xbd = -yb * ybd / xb
    xbdd = -(ybd**2 + yb * ybdd + xbd**2) / xb
    ll = xp.sqrt(xl**2 + yl**2)
    lr = xp.sqrt((xr - xb) ** 2 + (yr - yb) ** 2)
    f = xp.stack(
        [
            -(ll - L0) * xl / ll,
            -(ll - L0) * yl / ll - k * g,
            -(lr - L0) * (xr - xb) / lr,
            -(lr - L0) * (yr - yb) / lr - k * g,
        ]
    )
    dx, dy = xl - xr, yl - yr
    zero = 0.0 * xl
    J = xp.stack(
        [
            xp.stack([xb + zero, yb + zero, zero, zero]),
            xp.stack([2 * dx, 2 * dy, -2 * dx, -2 * dy]),
        ]
    )
    vxl, vyl, vxr, vyr = v[0], v[1], v[2], v[3]
    gamma = xp.stack(
        [
            2 * (xbd * vxl + ybd * vyl) + xbdd * xl + ybdd * yl,
            2 * ((vxl - vxr) ** 2 + (vyl - vyr) ** 2),
        ]
    )
    return k * xp.eye(4), f, J, gamma


def chain2_terms(xp, t, q, v, p):
    """Two point masses on massless rods, absolute Cartesian coordinates."""
    m, g = p["m"], p["g"]
    r1, r2 = q[:2], q[2:]
    v1, v2 = v[:2], v[2:]
    d, dv = r2 - r1, v2 - v1
    M = m * xp.eye(4)
    f = xp.stack([0.0 * q[0], -m * g + 0.0 * q[0], 0.0 * q[0], -m * g + 0.0 * q[0]])
    zero = 0.0 * r1
    J = xp.stack([xp.concatenate([2 * r1, zero]), xp.concatenate([-2 * d, 2 * d])])
    gamma = xp.stack([2 * v1 @ v1, 2 * dv @ dv])
    return M, f, J, gamma


TERMS = {"pendulum": pendulum_terms, "car_axis": car_axis_terms,
         "chain2": chain2_terms}  # fmt: skip


def kkt(xp, M, f, J, gamma):
    n, m = M.shape[0], J.shape[0]
    A = xp.block([[M, -J.T], [J, xp.zeros((m, m))]])
    b = xp.concatenate([f, -gamma])
    x = xp.linalg.solve(A, b)
    return x[:n], x[n:]


# -- NumPy + scipy.integrate.solve_ivp (DOP853) ----------------------------------


def numpy_dop853(terms, p, q0, v0, t1, tol):
    n = len(q0)

    def rhs(t, y):
        q, v = y[:n], y[n:]
        qdd, _ = kkt(np, *terms(np, t, q, v, p))
        return np.concatenate([v, qdd])

    sol = solve_ivp(rhs, (0.0, t1), np.concatenate([q0, v0]), method="DOP853",
                    rtol=tol, atol=tol)  # fmt: skip
    return sol.y[:n, -1], sol.nfev


# -- scipy_dae solve_dae (Radau), the stabilized index-1 form --------------------


def scipy_dae_radau(terms, p, q0, v0, t1, tol):
    # Imported here: scipy_dae is in the bench extra, which batch.py and chain.py
    # (run by the tests) do not need.
    from scipy_dae.integrate import solve_dae

    n = len(q0)
    M0, f0, J0, g0 = terms(np, 0.0, q0, v0, p)
    m = J0.shape[0]
    a0, lam0 = kkt(np, M0, f0, J0, g0)

    def residual(t, y, yp):
        q, v, lam = y[:n], y[n : 2 * n], y[2 * n :]
        M, f, J, gamma = terms(np, t, q, v, p)
        a = yp[n : 2 * n]
        return np.concatenate([yp[:n] - v, M @ a - f - J.T @ lam, J @ a + gamma])

    y0 = np.concatenate([q0, v0, lam0])
    yp0 = np.concatenate([v0, a0, np.zeros(m)])
    sol = solve_dae(residual, (0.0, t1), y0, yp0, method="Radau", rtol=tol, atol=tol)
    if not sol.success:
        return np.full(n, np.nan), 0
    return sol.y[:n, -1], sol.nfev


# -- hand-written jax + diffrax --------------------------------------------------


def jax_diffrax(terms, solver=None):
    """A jitted solve(p, q0, v0, t1, tol) with the KKT matrix solved by
    jnp.linalg.solve in the vector field, Dopri8 and a PID controller."""
    solver = dfx.Dopri8() if solver is None else solver

    def field(t, y, p):
        q, v = y
        qdd, _ = kkt(jnp, *terms(jnp, t, q, v, p))
        return v, qdd

    @jax.jit
    def solve(p, q0, v0, t1, tol):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(field), solver, 0.0, t1, None, (q0, v0), args=p,
            stepsize_controller=dfx.PIDController(rtol=tol, atol=tol),
            max_steps=1_000_000,
        )  # fmt: skip
        return sol.ys[0][-1], sol.stats["num_steps"]

    return solve
