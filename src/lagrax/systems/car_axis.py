"""The car axis: an index-3 benchmark with a time-dependent constraint."""

import jax.numpy as jnp

from .._model import Model
from .._system import System


def _bump(t, p):
    """The right end of the axle rides over a bump: (xb(t), yb(t)), |.| = L."""
    yb = p["r"] * jnp.sin(p["w"] * t)
    return jnp.sqrt(p["L"] ** 2 - yb**2), yb


def _lagrangian(t, q, qd, p):
    xl, yl, xr, yr = q
    xb, yb = _bump(t, p)
    k = p["M"] * p["eps"] ** 2 / 2
    left = jnp.sqrt(xl**2 + yl**2)
    right = jnp.sqrt((xr - xb) ** 2 + (yr - yb) ** 2)
    springs = 0.5 * (left - p["L0"]) ** 2 + 0.5 * (right - p["L0"]) ** 2
    return 0.5 * k * qd @ qd - springs - k * p["g"] * (yl + yr)


def _constraints(t, q, p):
    xl, yl, xr, yr = q
    xb, yb = _bump(t, p)
    return jnp.stack([xb * xl + yb * yl, (xl - xr) ** 2 + (yl - yr) ** 2 - p["L"] ** 2])


def _points(t, q, p):
    xb, yb = _bump(t, p)
    origin = jnp.zeros(2, q.dtype)
    return jnp.stack([origin, q[:2], q[2:], jnp.stack([xb, yb]).astype(q.dtype)])


REFERENCE = {
    "t": 3.0,
    "q": (
        0.4934557842755629e-1, 0.4969894602303324e0, 0.1041742524885400e1,
        0.3739110272652214e0,
    ),
    "qd": (
        -0.7705836840321485e-1, 0.7446866596327776e-2, 0.1755681574942899e-1,
        0.7703410437794031e0,
    ),
    "multipliers": (-0.4736886750784630e-2, -0.1104680411345730e-2),
}  # fmt: skip
"""The IVP Test Set's reference solution at t = 3 (same sign convention)."""


def _constraint_forces(t, q, lam, p):
    # The rolling constraint on the left wheel pushes along (xb, yb); the axle
    # length constraint acts along the axle on the right wheel.
    xb, yb = _bump(t, p)
    left, right = q[:2], q[2:]
    rolling = lam[0] * jnp.stack([xb, yb]).astype(q.dtype)
    axle = -2 * lam[1] * (left - right)
    return jnp.stack([left, right]), jnp.stack([rolling, axle])


def car_axis() -> Model:
    """A car axle on two springs, its right wheel driven over a bump.

    The car axis problem of the IVP Test Set (Mazzia and Magherini; Hairer &
    Wanner, Solving ODEs II, VII.1): masses at (xl, yl) and (xr, yr), joined by a
    rod of length L, hang on springs (rest length L0) from the origin and from the
    wheel point (xb, yb)(t) = (sqrt(L^2 - yb^2), r sin(w t)). The first constraint,
    xb(t) xl + yb(t) yl = 0, depends on time explicitly. Small masses
    (M eps^2 / 2) make it stiff and oscillatory. The test set writes
    M q'' = f + G^T lam, as lagrax does.
    """
    return Model(
        name="car_axis",
        description="car axle on springs over a bump; time-dependent constraint",
        system=System(_lagrangian, _constraints),
        params={
            "eps": 1e-2,
            "M": 10.0,
            "L": 1.0,
            "L0": 0.5,
            "r": 0.1,
            "w": 10.0,
            "g": 1.0,
        },  # fmt: skip
        coordinates=("xl", "yl", "xr", "yr"),
        units=("m", "m", "m", "m"),
        constraint_names=("wheel", "axle length"),
        # Both rows are quadratic in lengths (m^2): J^T lam is a force for lam
        # in N/m.
        multiplier_units=("N/m", "N/m"),
        q_guess=(0.0, 0.5, 1.0, 0.5),
        qd_guess=(-0.5, 0.0, -0.5, 0.0),
        fixed_qd=(0, 2),
        points=_points,
        constraint_forces=_constraint_forces,
        reference=REFERENCE,
        segments=((1, 2),),
        springs=((0, 1), (3, 2)),
        conservative=False,  # the wheel is driven over the bump
    )
