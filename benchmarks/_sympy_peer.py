"""The SymPy peer: equations derived symbolically and lambdified, as users do.

Each problem is written once more, in SymPy: its Lagrangian, constraints and
applied generalized forces, with the parameters as numbers. `derive` forms the
mass matrix M = d2L/dqd2, the remaining force terms
f = dL/dq - (d2L/dqd dq) qd - d2L/dqd dt + Q, the constraint Jacobian J and the
acceleration-level remainder gamma = d(J qd + phi_t)/dq qd + d(J qd + phi_t)/dt,
and lambdifies them (with common subexpressions eliminated) for NumPy or JAX.
The result plugs into the peers of `_peers.py` as a `terms(xp, t, q, v, p)`.
"""

import time

import sympy as sp


def pendulum(t, q, qd, p):
    x, y = q
    L = p["m"] * (qd[0] ** 2 + qd[1] ** 2) / 2 - p["m"] * p["g"] * y
    return L, [x**2 + y**2 - p["l"] ** 2], [0, 0]


def car_axis(t, q, qd, p):
    xl, yl, xr, yr = q
    k = p["M"] * p["eps"] ** 2 / 2
    yb = p["r"] * sp.sin(p["w"] * t)
    xb = sp.sqrt(p["L"] ** 2 - yb**2)
    left = sp.sqrt(xl**2 + yl**2)
    right = sp.sqrt((xr - xb) ** 2 + (yr - yb) ** 2)
    V = (left - p["L0"]) ** 2 / 2 + (right - p["L0"]) ** 2 / 2 + k * p["g"] * (yl + yr)
    L = k * sum(v**2 for v in qd) / 2 - V
    phi = [xb * xl + yb * yl, (xl - xr) ** 2 + (yl - yr) ** 2 - p["L"] ** 2]
    return L, phi, [0] * 4


def double_pendulum(t, q, qd, p):
    x1, y1, x2, y2 = q
    m, l, g, k = p["m"], p["l"], p["g"], p["k"]
    v1 = (qd[0], qd[1])
    v2 = (qd[0] + qd[2], qd[1] + qd[3])
    w1 = (x1 * qd[1] - y1 * qd[0]) / (x1**2 + y1**2)
    w2 = (x2 * qd[3] - y2 * qd[2]) / (x2**2 + y2**2)
    inertia = m * l**2 / 3
    T = m * (v1[0] ** 2 + v1[1] ** 2 + v2[0] ** 2 + v2[1] ** 2) / 2
    T += inertia * (w1**2 + w2**2) / 2
    relative = sp.atan2(x1 * y2 - y1 * x2, x1 * x2 + y1 * y2)
    V = m * g * (y1 + (y1 + y2)) + k * relative**2 / 2
    forces = [-p["c"] * (2 * qd[0] + qd[2]), -p["c"] * (2 * qd[1] + qd[3]),
              -p["c"] * (qd[0] + qd[2]), -p["c"] * (qd[1] + qd[3])]  # fmt: skip
    phi = [x1**2 + y1**2 - l**2, x2**2 + y2**2 - l**2]
    return T - V, phi, forces


def andrews(t, q, qd, p):
    be, th, ga, ph, de, om, ep = q
    eea, zfa = p["e"] - p["ea"], p["zf"] - p["fa"]
    m = sp.zeros(7, 7)
    m[0, 0] = (p["m1"] * p["ra"] ** 2 + p["m2"] * (p["rr"] ** 2 - 2 * p["da"] * p["rr"]
               * sp.cos(th) + p["da"] ** 2) + p["i1"] + p["i2"])  # fmt: skip
    m[0, 1] = m[1, 0] = (
        p["m2"] * (p["da"] ** 2 - p["da"] * p["rr"] * sp.cos(th)) + p["i2"]
    )
    m[1, 1] = p["m2"] * p["da"] ** 2 + p["i2"]
    m[2, 2] = p["m3"] * (p["sa"] ** 2 + p["sb"] ** 2) + p["i3"]
    m[3, 3] = p["m4"] * eea**2 + p["i4"]
    m[3, 4] = m[4, 3] = p["m4"] * (eea**2 + p["zt"] * eea * sp.sin(ph)) + p["i4"]
    m[4, 4] = (
        p["m4"] * (p["zt"] ** 2 + 2 * p["zt"] * eea * sp.sin(ph) + eea**2)
        + p["m5"] * (p["ta"] ** 2 + p["tb"] ** 2)
        + p["i4"]
        + p["i5"]
    )
    m[5, 5] = p["m6"] * zfa**2 + p["i6"]
    m[5, 6] = m[6, 5] = p["m6"] * (zfa**2 - p["u"] * zfa * sp.sin(om)) + p["i6"]
    m[6, 6] = (
        p["m6"] * (zfa**2 - 2 * p["u"] * zfa * sp.sin(om) + p["u"] ** 2)
        + p["m7"] * (p["ua"] ** 2 + p["ub"] ** 2)
        + p["i6"]
        + p["i7"]
    )
    v = sp.Matrix(qd)
    xs = p["sd"] * sp.cos(ga) + p["sc"] * sp.sin(ga) + p["xb"]
    ys = p["sd"] * sp.sin(ga) - p["sc"] * sp.cos(ga) + p["yb"]
    length = sp.sqrt((xs - p["xc"]) ** 2 + (ys - p["yc"]) ** 2)
    L = (v.T * m * v)[0, 0] / 2 - p["c0"] * (length - p["l0"]) ** 2 / 2
    x = p["rr"] * sp.cos(be) - p["d"] * sp.cos(be + th)
    y = p["rr"] * sp.sin(be) - p["d"] * sp.sin(be + th)
    e, zt, zf, u, ss = p["e"], p["zt"], p["zf"], p["u"], p["ss"]
    phi = [
        x - ss * sp.sin(ga) - p["xb"],
        y + ss * sp.cos(ga) - p["yb"],
        x - e * sp.sin(ph + de) - zt * sp.cos(de) - p["xa"],
        y + e * sp.cos(ph + de) - zt * sp.sin(de) - p["ya"],
        x - zf * sp.cos(om + ep) - u * sp.sin(ep) - p["xa"],
        y - zf * sp.sin(om + ep) + u * sp.cos(ep) - p["ya"],
    ]
    return L, phi, [p["mom"], 0, 0, 0, 0, 0, 0]


MODELS = {"pendulum": pendulum, "car_axis": car_axis,
          "double_pendulum": double_pendulum, "andrews": andrews}  # fmt: skip


def derive(name, params, n, modules="numpy"):
    """(terms(xp, t, q, v, p) for the peers, set-up seconds).

    The set-up time is the symbolic derivation plus lambdify.
    """
    start = time.perf_counter()
    t = sp.Symbol("t")
    q = sp.symbols(f"q0:{n}")
    qd = sp.symbols(f"v0:{n}")
    L, phi, forces = MODELS[name](t, q, qd, params)
    qv, vv = sp.Matrix(q), sp.Matrix(qd)
    p_L = sp.Matrix([L]).jacobian(vv)  # dL/dqd as a row
    M = p_L.jacobian(vv)
    f = (sp.Matrix([L]).jacobian(qv) - (p_L.jacobian(qv) * vv).T - p_L.diff(t)).T
    f += sp.Matrix(forces)
    phi = sp.Matrix(phi)
    J = phi.jacobian(qv)
    rate = J * vv + phi.diff(t)
    gamma = rate.jacobian(qv) * vv + rate.diff(t)
    fn = sp.lambdify((t, q, qd), [M, f, J, gamma], modules=modules, cse=True)
    setup = time.perf_counter() - start

    def terms(xp, t_, q_, v_, p_):
        M_, f_, J_, g_ = fn(t_, q_, v_)
        return (
            xp.asarray(M_, dtype=float),
            xp.ravel(xp.asarray(f_, dtype=float)),
            xp.asarray(J_, dtype=float),
            xp.ravel(xp.asarray(g_, dtype=float)),
        )

    return terms, setup
