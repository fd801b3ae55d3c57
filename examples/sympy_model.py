"""A model written with SymPy, run and differentiated by lagrax.

A double pendulum (point masses on rigid rods, a damper in the second joint)
written with `sympy.physics.mechanics`: the Lagrangian in the two angles, the
damper as a generalized force. `lx.from_sympy` turns it into JAX functions;
lagrax then simulates it, checks its accelerations against SymPy's own
equations of motion (LagrangesMethod), and differentiates the final angle with
respect to a rod length through the whole simulation (against central finite
differences).

    python examples/sympy_model.py [--quick] [--out results/sympy_model.png]
"""

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import sympy as sp  # noqa: E402
from _common import check_out, parser, save  # noqa: E402
from sympy.physics import mechanics as me  # noqa: E402

import lagrax as lx  # noqa: E402


T = me.dynamicsymbols._t
TH = me.dynamicsymbols("theta1 theta2")
M1, M2, L1, L2, G, C = sp.symbols("m1 m2 l1 l2 g c", positive=True)
PARAMS = {"m1": 1.0, "m2": 0.8, "l1": 1.0, "l2": 0.7, "g": 9.81, "c": 0.05}


def lagrangian():
    p1 = sp.Matrix([L1 * sp.sin(TH[0]), -L1 * sp.cos(TH[0])])
    p2 = p1 + sp.Matrix([L2 * sp.sin(TH[1]), -L2 * sp.cos(TH[1])])
    v1, v2 = p1.diff(T), p2.diff(T)
    return M1 * v1.dot(v1) / 2 + M2 * v2.dot(v2) / 2 - G * (M1 * p1[1] + M2 * p2[1])


def main(argv=None):
    p = parser(__doc__, "results/sympy_model.png")
    args = p.parse_args(argv)
    check_out(p, args)
    L = lagrangian()
    relative = TH[1].diff(T) - TH[0].diff(T)
    system = lx.from_sympy(L, TH, forces=[C * relative, -C * relative])

    # SymPy's own equations, M(q) qdd = f(q, qd), at a state, against lagrax.
    method = me.LagrangesMethod(L, TH)
    method.form_lagranges_equations()
    rates = [th.diff(T) for th in TH]
    symbols = [*TH, *rates, M1, M2, L1, L2, G]
    mass = sp.lambdify(symbols, method.mass_matrix)
    forcing = sp.lambdify(symbols, method.forcing)
    q, qd = np.array([2.0, 1.0]), np.array([0.3, -0.4])
    args_ = (*q, *qd, *(PARAMS[k] for k in ("m1", "m2", "l1", "l2", "g")))
    damper = PARAMS["c"] * (qd[1] - qd[0]) * np.array([1.0, -1.0])
    sympy_qdd = np.linalg.solve(
        np.asarray(mass(*args_), float),
        np.asarray(forcing(*args_), float).ravel() + damper,
    )
    ours, _ = lx.accelerations(system, 0.0, jnp.asarray(q), jnp.asarray(qd), PARAMS)
    print(
        f"accelerations: lagrax {np.asarray(ours)}, SymPy's LagrangesMethod "
        f"{sympy_qdd}: largest difference {np.abs(ours - sympy_qdd).max():.1e}"
    )

    t1 = 2.0 if args.quick else 10.0
    ts = jnp.linspace(0.0, t1, 401)

    def final_angle(l1):
        sol = lx.simulate(system, jnp.asarray(q), jnp.asarray(qd),
                          {**PARAMS, "l1": l1}, t1=t1, ts=ts, rtol=1e-10,
                          atol=1e-10)  # fmt: skip
        return sol.q[-1, 1]

    grad = float(jax.grad(final_angle)(PARAMS["l1"]))
    h = 1e-5
    fd = float(final_angle(PARAMS["l1"] + h) - final_angle(PARAMS["l1"] - h)) / (2 * h)
    print(
        f"d theta2({t1:g} s) / d l1 = {grad:.6f} by autodiff, {fd:.6f} by "
        f"central differences (relative difference {abs(grad - fd) / abs(fd):.1e})"
    )

    sol = lx.simulate(system, jnp.asarray(q), jnp.asarray(qd), PARAMS, t1=t1, ts=ts)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    a1.plot(ts, sol.q[:, 0], label="θ1")
    a1.plot(ts, sol.q[:, 1], label="θ2")
    a1.set(
        xlabel="t [s]", ylabel="angle [rad]", title="written in SymPy, run by lagrax"
    )
    a1.legend()
    a1.grid(True, alpha=0.3)
    x2 = PARAMS["l1"] * np.sin(sol.q[:, 0]) + PARAMS["l2"] * np.sin(sol.q[:, 1])
    y2 = -PARAMS["l1"] * np.cos(sol.q[:, 0]) - PARAMS["l2"] * np.cos(sol.q[:, 1])
    a2.plot(x2, y2, lw=0.8)
    a2.set(xlabel="x [m]", ylabel="y [m]", title="path of the second mass",
           aspect="equal")  # fmt: skip
    a2.grid(True, alpha=0.3)
    save(lambda tmp: fig.savefig(tmp, dpi=120), args.out)
    plt.close(fig)


if __name__ == "__main__":
    main()
