"""Classic index-3 benchmarks against their published reference solutions.

Both come from the Test Set for IVP Solvers (F. Mazzia, C. Magherini, Bari), in
the form of Hairer & Wanner, Solving ODEs II, sect. VII.7. Each is written here as
a user would: a Lagrangian, constraints and forces through the public API. The
test set writes Andrews as M q'' = f - G^T lam (its multipliers are minus ours)
and the car axis as M q'' = f + G^T lam (ours).
The reference velocities, accelerations and multipliers of these index-3 problems
are less accurate than the positions (the test set scores positions only for
Andrews); the tolerances below follow that.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


# --- Andrews' squeezing mechanism: 7 angles, 6 loop-closure constraints ---------

ANDREWS = dict(
    m1=0.04325, m2=0.00365, m3=0.02373, m4=0.00706, m5=0.07050, m6=0.00706,
    m7=0.05498, xa=-0.06934, ya=-0.00227, xb=-0.03635, yb=0.03273, xc=0.014,
    yc=0.072, c0=4530.0, i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7,
    i5=1.169e-5, i6=5.667e-7, i7=1.912e-5, d=28e-3, da=115e-4, e=2e-2,
    ea=1421e-5, rr=7e-3, ra=92e-5, l0=7785e-5, ss=35e-3, sa=1874e-5, sb=1043e-5,
    sc=18e-3, sd=2e-2, ta=2308e-5, tb=916e-5, u=4e-2, ua=1228e-5, ub=449e-5,
    zf=2e-2, zt=4e-2, fa=1421e-5, mom=33e-3,
)  # fmt: skip

ANDREWS_Q0 = [
    -0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
    0.222668390165885884674473185609, 0.487364979543842550225598953530,
    -0.222668390165885884674473185609, 1.23054744454982119249735015568,
]  # fmt: skip

# y(t = 0.03): positions, velocities, accelerations, multipliers (PSIDE, 1e-14).
ANDREWS_REF = np.array([
    0.1581077119629904e2, -0.1575637105984298e2, 0.4082224013073101e-1,
    -0.5347301163226948e0, 0.5244099658805304e0, 0.5347301163226948e0,
    0.1048080741042263e1, 0.1139920302151208e4, -0.1424379294994111e4,
    0.1103291221937134e2, 0.1929337464421385e2, 0.5735699284790808e0,
    -0.1929337464421385e2, 0.3231791658026955e0, -0.2463176316945196e5,
    0.5185037701610329e5, 0.3241025686413781e6, 0.5667493645176213e6,
    0.1674362929479361e5, -0.5667493645176222e6, 0.9826520791458422e4,
    0.1991753333731910e3, -0.2975531228015052e2, 0.2306654119098399e2,
    0.3145271365475927e2, 0.2264249232082739e2, 0.1161740700019673e2,
])  # fmt: skip


def andrews_mass(q, p):
    _, th, _, ph, _, om, _ = q
    eea, zfa = p["e"] - p["ea"], p["zf"] - p["fa"]
    m11 = (
        p["m1"] * p["ra"] ** 2
        + p["m2"] * (p["rr"] ** 2 - 2 * p["da"] * p["rr"] * jnp.cos(th) + p["da"] ** 2)
        + p["i1"]
        + p["i2"]
    )
    m21 = p["m2"] * (p["da"] ** 2 - p["da"] * p["rr"] * jnp.cos(th)) + p["i2"]
    m22 = p["m2"] * p["da"] ** 2 + p["i2"]
    m33 = p["m3"] * (p["sa"] ** 2 + p["sb"] ** 2) + p["i3"]
    m44 = p["m4"] * eea**2 + p["i4"]
    m54 = p["m4"] * (eea**2 + p["zt"] * eea * jnp.sin(ph)) + p["i4"]
    m55 = (
        p["m4"] * (p["zt"] ** 2 + 2 * p["zt"] * eea * jnp.sin(ph) + eea**2)
        + p["m5"] * (p["ta"] ** 2 + p["tb"] ** 2)
        + p["i4"]
        + p["i5"]
    )
    m66 = p["m6"] * zfa**2 + p["i6"]
    m76 = p["m6"] * (zfa**2 - p["u"] * zfa * jnp.sin(om)) + p["i6"]
    m77 = (
        p["m6"] * (zfa**2 - 2 * p["u"] * zfa * jnp.sin(om) + p["u"] ** 2)
        + p["m7"] * (p["ua"] ** 2 + p["ub"] ** 2)
        + p["i6"]
        + p["i7"]
    )
    zero = jnp.zeros_like(th)
    return jnp.array(
        [
            [m11, m21, zero, zero, zero, zero, zero],
            [m21, m22, zero, zero, zero, zero, zero],
            [zero, zero, m33, zero, zero, zero, zero],
            [zero, zero, zero, m44, m54, zero, zero],
            [zero, zero, zero, m54, m55, zero, zero],
            [zero, zero, zero, zero, zero, m66, m76],
            [zero, zero, zero, zero, zero, m76, m77],
        ]
    )


def andrews_lagrangian(t, q, qd, p):
    ga = q[2]
    xd = p["sd"] * jnp.cos(ga) + p["sc"] * jnp.sin(ga) + p["xb"]
    yd = p["sd"] * jnp.sin(ga) - p["sc"] * jnp.cos(ga) + p["yb"]
    spring = jnp.sqrt((xd - p["xc"]) ** 2 + (yd - p["yc"]) ** 2)
    return 0.5 * qd @ andrews_mass(q, p) @ qd - 0.5 * p["c0"] * (spring - p["l0"]) ** 2


def andrews_constraints(t, q, p):
    be, th, ga, ph, de, om, ep = q
    rr, d, ss, e, zt, zf, u = (p[k] for k in ("rr", "d", "ss", "e", "zt", "zf", "u"))
    x = rr * jnp.cos(be) - d * jnp.cos(be + th)
    y = rr * jnp.sin(be) - d * jnp.sin(be + th)
    return jnp.stack(
        [
            x - ss * jnp.sin(ga) - p["xb"],
            y + ss * jnp.cos(ga) - p["yb"],
            x - e * jnp.sin(ph + de) - zt * jnp.cos(de) - p["xa"],
            y + e * jnp.cos(ph + de) - zt * jnp.sin(de) - p["ya"],
            x - zf * jnp.cos(om + ep) - u * jnp.sin(ep) - p["xa"],
            y - zf * jnp.sin(om + ep) + u * jnp.cos(ep) - p["ya"],
        ]
    )


def andrews_forces(t, q, qd, p):
    return jnp.zeros_like(q).at[0].set(p["mom"])  # the driving torque on beta


ANDREWS_SYSTEM = lx.System(andrews_lagrangian, andrews_constraints, andrews_forces)


def test_andrews_initial_accelerations_and_multipliers():
    q0 = jnp.array(ANDREWS_Q0)
    np.testing.assert_allclose(andrews_constraints(0.0, q0, ANDREWS), 0.0, atol=1e-16)
    qdd, lam = lx.accelerations(ANDREWS_SYSTEM, 0.0, q0, jnp.zeros(7), ANDREWS)
    # The test set's consistent initial values.
    np.testing.assert_allclose(
        qdd, [14222.4439199541138705911625887, -10666.8329399655854029433719415,
              0, 0, 0, 0, 0], rtol=1e-12, atol=1e-9,
    )  # fmt: skip
    np.testing.assert_allclose(
        -lam, [98.5668703962410896057654982170, -6.12268834425566265503114393122,
               0, 0, 0, 0], rtol=1e-12, atol=1e-11,
    )  # fmt: skip


def test_andrews_at_t_003():
    sol = lx.simulate(
        ANDREWS_SYSTEM, jnp.array(ANDREWS_Q0), jnp.zeros(7), ANDREWS, t1=0.03,
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    ref = ANDREWS_REF
    np.testing.assert_allclose(sol.q[-1], ref[:7], rtol=1e-9)
    np.testing.assert_allclose(sol.qd[-1], ref[7:14], rtol=2e-7)
    np.testing.assert_allclose(sol.qdd[-1], ref[14:21], rtol=1e-5)
    np.testing.assert_allclose(-sol.multipliers[-1], ref[21:], rtol=1e-5)


# --- The car axis: 4 coordinates, 2 constraints, one of them time-dependent -----

CAR = dict(eps=1e-2, M=10.0, L=1.0, L0=0.5, r=0.1, w=10.0, g=1.0)

CAR_REF = np.array([
    0.4934557842755629e-1, 0.4969894602303324e0, 0.1041742524885400e1,
    0.3739110272652214e0, -0.7705836840321485e-1, 0.7446866596327776e-2,
    0.1755681574942899e-1, 0.7703410437794031e0, -0.4736886750784630e-2,
    -0.1104680411345730e-2,
])  # fmt: skip


def _car_bump(t, p):
    """The right wheel's axle point moves over a bump: (xb(t), yb(t))."""
    yb = p["r"] * jnp.sin(p["w"] * t)
    return jnp.sqrt(p["L"] ** 2 - yb**2), yb


def car_lagrangian(t, q, qd, p):
    xl, yl, xr, yr = q
    xb, yb = _car_bump(t, p)
    k = p["M"] * p["eps"] ** 2 / 2
    left = jnp.sqrt(xl**2 + yl**2)
    right = jnp.sqrt((xr - xb) ** 2 + (yr - yb) ** 2)
    springs = 0.5 * (left - p["L0"]) ** 2 + 0.5 * (right - p["L0"]) ** 2
    return 0.5 * k * qd @ qd - springs - k * p["g"] * (yl + yr)


def car_constraints(t, q, p):
    xl, yl, xr, yr = q
    xb, yb = _car_bump(t, p)
    return jnp.stack([xb * xl + yb * yl, (xl - xr) ** 2 + (yl - yr) ** 2 - p["L"] ** 2])


def test_car_axis_at_t_3():
    L0, L = CAR["L0"], CAR["L"]
    q0 = jnp.array([0.0, L0, L, L0])
    qd0 = jnp.array([-L0 / L, 0.0, -L0 / L, 0.0])
    sol = lx.simulate(
        lx.System(car_lagrangian, car_constraints), q0, qd0, CAR, t1=3.0,
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    ref = CAR_REF
    np.testing.assert_allclose(sol.q[-1], ref[:4], rtol=2e-9)
    np.testing.assert_allclose(sol.qd[-1], ref[4:8], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sol.multipliers[-1], ref[8:], rtol=1e-6, atol=1e-9)
    assert np.abs(np.asarray(sol.phi)).max() < 1e-13


@pytest.mark.parametrize("stabilization", ["none", "baumgarte"])
def test_car_axis_positions_under_other_stabilizations(stabilization):
    L0, L = CAR["L0"], CAR["L"]
    stab = {"none": lx.NoStabilization(), "baumgarte": lx.Baumgarte(10.0, 10.0)}
    sol = lx.simulate(
        lx.System(car_lagrangian, car_constraints),
        jnp.array([0.0, L0, L, L0]), jnp.array([-L0 / L, 0.0, -L0 / L, 0.0]), CAR,
        t1=3.0, rtol=1e-10, atol=1e-10, stabilization=stab[stabilization],
    )  # fmt: skip
    np.testing.assert_allclose(sol.q[-1], CAR_REF[:4], rtol=2e-9)
