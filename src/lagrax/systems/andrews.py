"""Andrews' squeezing mechanism: the classic index-3 multibody benchmark."""

import jax.numpy as jnp

from .._model import Model
from .._system import System


def _mass(q, p):
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
    z = jnp.zeros_like(th)
    return jnp.array(
        [
            [m11, m21, z, z, z, z, z],
            [m21, m22, z, z, z, z, z],
            [z, z, m33, z, z, z, z],
            [z, z, z, m44, m54, z, z],
            [z, z, z, m54, m55, z, z],
            [z, z, z, z, z, m66, m76],
            [z, z, z, z, z, m76, m77],
        ]
    )


def _spring_end(q, p):
    """Where the spring attaches to the body turning by gamma about B."""
    ga = q[2]
    return jnp.stack(
        [
            p["sd"] * jnp.cos(ga) + p["sc"] * jnp.sin(ga) + p["xb"],
            p["sd"] * jnp.sin(ga) - p["sc"] * jnp.cos(ga) + p["yb"],
        ]
    )


def _lagrangian(t, q, qd, p):
    end = _spring_end(q, p)
    length = jnp.sqrt((end[0] - p["xc"]) ** 2 + (end[1] - p["yc"]) ** 2)
    return 0.5 * qd @ _mass(q, p) @ qd - 0.5 * p["c0"] * (length - p["l0"]) ** 2


def _joint(q, p):
    """The point where the three loops close, reached from the crank."""
    be, th = q[0], q[1]
    return jnp.stack(
        [
            p["rr"] * jnp.cos(be) - p["d"] * jnp.cos(be + th),
            p["rr"] * jnp.sin(be) - p["d"] * jnp.sin(be + th),
        ]
    )


def _constraints(t, q, p):
    _, _, ga, ph, de, om, ep = q
    x, y = _joint(q, p)
    e, zt, zf, u, ss = p["e"], p["zt"], p["zf"], p["u"], p["ss"]
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


def _forces(t, q, qd, p):
    return jnp.zeros_like(q).at[0].set(p["mom"])  # the motor torque on beta


def _points(t, q, p):
    be, _, _, _, de, _, ep = q
    origin = jnp.zeros(2, q.dtype)
    crank = p["rr"] * jnp.stack([jnp.cos(be), jnp.sin(be)])
    a = jnp.stack([p["xa"], p["ya"]]).astype(q.dtype)
    b = jnp.stack([p["xb"], p["yb"]]).astype(q.dtype)
    c = jnp.stack([p["xc"], p["yc"]]).astype(q.dtype)
    elbow4 = a + p["zt"] * jnp.stack([jnp.cos(de), jnp.sin(de)])
    elbow6 = a + p["u"] * jnp.stack([jnp.sin(ep), -jnp.cos(ep)])
    return jnp.stack(
        [origin, crank, _joint(q, p), b, a, elbow4, elbow6, c, _spring_end(q, p)]
    )


def _constraint_forces(t, q, lam, p):
    # Each loop's rows are r_E(crank side) - r_E(other side): its multipliers
    # are the force on the crank side at the joint E, minus them on the arm
    # that closes the loop (gamma's, A1's, A2's), drawn here.
    where = jnp.broadcast_to(_joint(q, p), (3, 2))
    return where, -lam.reshape(3, 2)


def _with_motor_off(p):
    return float(p["mom"]) == 0.0


PARAMS = dict(
    m1=0.04325, m2=0.00365, m3=0.02373, m4=0.00706, m5=0.07050, m6=0.00706,
    m7=0.05498, xa=-0.06934, ya=-0.00227, xb=-0.03635, yb=0.03273, xc=0.014,
    yc=0.072, c0=4530.0, i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7,
    i5=1.169e-5, i6=5.667e-7, i7=1.912e-5, d=28e-3, da=115e-4, e=2e-2,
    ea=1421e-5, rr=7e-3, ra=92e-5, l0=7785e-5, ss=35e-3, sa=1874e-5, sb=1043e-5,
    sc=18e-3, sd=2e-2, ta=2308e-5, tb=916e-5, u=4e-2, ua=1228e-5, ub=449e-5,
    zf=2e-2, zt=4e-2, fa=1421e-5, mom=33e-3,
)  # fmt: skip


REFERENCE = {
    "t": 0.03,
    "q": (
        0.1581077119629904e2, -0.1575637105984298e2, 0.4082224013073101e-1,
        -0.5347301163226948e0, 0.5244099658805304e0, 0.5347301163226948e0,
        0.1048080741042263e1,
    ),
    "qd": (
        0.1139920302151208e4, -0.1424379294994111e4, 0.1103291221937134e2,
        0.1929337464421385e2, 0.5735699284790808e0, -0.1929337464421385e2,
        0.3231791658026955e0,
    ),
    "qdd": (
        -0.2463176316945196e5, 0.5185037701610329e5, 0.3241025686413781e6,
        0.5667493645176213e6, 0.1674362929479361e5, -0.5667493645176222e6,
        0.9826520791458422e4,
    ),
    # Minus the test set's lambda: it writes M q'' = f - G^T lambda.
    "multipliers": (
        -0.1991753333731910e3, 0.2975531228015052e2, -0.2306654119098399e2,
        -0.3145271365475927e2, -0.2264249232082739e2, -0.1161740700019673e2,
    ),
}  # fmt: skip
"""The IVP Test Set's reference solution at t = 0.03 (PSIDE, tolerance 1e-14), in
lagrax's sign convention. Its positions are the accurate part."""


def andrews() -> Model:
    """Andrews' squeezing mechanism (seven bodies, seven angles, six constraints).

    A motor torque `mom` drives a crank (beta); three closed loops and a stiff
    spring make it a classic stiff index-3 test (Hairer & Wanner, Solving ODEs II,
    VII.7; the IVP Test Set of Mazzia and Magherini). Given by its mass matrix
    M(q), so L = qd^T M(q) qd / 2 - c0 (l - l0)^2 / 2. Starts at rest in the test
    set's consistent configuration; the interesting interval is t in [0, 0.03].
    The test set writes M q'' = f - G^T lam: its multipliers are minus lagrax's.
    """
    return Model(
        name="andrews",
        description="Andrews' squeezing mechanism, 7 angles, 6 loop constraints",
        system=System(_lagrangian, _constraints, _forces),
        params=dict(PARAMS),
        coordinates=("beta", "theta", "gamma", "phi", "delta", "Omega", "epsilon"),
        units=("rad",) * 7,
        constraint_names=(
            "loop B x",
            "loop B y",
            "loop A1 x",
            "loop A1 y",
            "loop A2 x",
            "loop A2 y",
        ),  # fmt: skip
        multiplier_units=("N",) * 6,  # the rows are positions of E (m)
        q_guess=(
            -0.0617138900142764496358948458001,
            0.0,
            0.455279819163070380255912382449,
            0.222668390165885884674473185609,
            0.487364979543842550225598953530,
            -0.222668390165885884674473185609,
            1.23054744454982119249735015568,
        ),  # fmt: skip
        qd_guess=(0.0,) * 7,
        fixed_q=(0,),
        fixed_qd=(0,),
        points=_points,
        constraint_forces=_constraint_forces,
        reference=REFERENCE,
        segments=(
            (0, 1),
            (1, 2),
            (2, 3),
            (4, 5),
            (5, 2),
            (4, 6),
            (6, 2),
            (3, 8),
        ),
        springs=((7, 8),),
        conservative=_with_motor_off,
    )
