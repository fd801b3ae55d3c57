"""A heavy symmetric top (Lagrange top) on a fixed pivot: one spatial body."""

import math

import jax
import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model
from ._drawing import cabinet


TOP = lb.SpatialBody(0, "m", lambda p: jnp.stack([p["I1"], p["I1"], p["I3"]]))
BODIES = (TOP,)


def _pivot(p):
    # The pivot, a distance h below the mass centre on the symmetry axis.
    return jnp.stack([0.0, 0.0, -p["h"]])


JOINTS = (lb.Spherical(lb.GROUND_3D, (0.0, 0.0, 0.0), TOP, _pivot, name="pivot"),)


def _points(t, q, p):
    rim = [
        TOP.position(q, p, lambda p_, a=a: p_["rho"] * jnp.stack(
            [math.cos(a), math.sin(a), 0.0]))
        for a in (0.0, math.pi / 2, math.pi, 3 * math.pi / 2)
    ]  # fmt: skip
    tip = TOP.position(q, p, lambda p_: jnp.stack([0.0, 0.0, p_["h"]]))
    world = [jnp.zeros(3, q.dtype), *rim, tip]
    return jnp.stack([cabinet(r) for r in world])


def symmetry_axis(q) -> jnp.ndarray:
    """The top's symmetry axis in the world frame (the third column of R)."""
    return TOP.rotation(q)[:, 2]


_PIVOT_FORCE = lb.joint_forces(BODIES, JOINTS)


def _constraint_forces(t, q, lam, p):
    # The ball joint's force on the top at the pivot, in the drawing's
    # projection (linear, so points and vectors map alike).
    where, forces = _PIVOT_FORCE(t, q, lam, p)
    return jax.vmap(cabinet)(where), jax.vmap(cabinet)(forces)


def top() -> Model:
    """Lagrange's heavy symmetric top: m = 1 kg, mass centre h = 0.1 m above the
    pivot, I1 = 0.01 (about the mass centre, transverse), I3 = 0.008 kg m^2.

    One spatial body: 7 coordinates (mass centre and unit quaternion), the ball
    joint at the pivot (3 rows) and |e| = 1 (1 row): 3 degrees of freedom.
    Released tilted 0.5 rad from the vertical about x, spinning at 60 rad/s about
    its axis with no precession: it nutates between cusps and precesses. `rho`
    only sizes the drawn disc.
    """
    theta0, spin = 0.5, 60.0
    e0 = (math.cos(theta0 / 2), math.sin(theta0 / 2), 0.0, 0.0)
    # edot = e * (0, omega_body) / 2 with omega_body = (0, 0, spin).
    w, x, y, z = e0
    ed0 = (-z * spin / 2, y * spin / 2, -x * spin / 2, w * spin / 2)
    h = 0.1
    return Model(
        name="top",
        description="heavy symmetric top on a ball joint (7 coords, quaternion)",
        system=lb.assemble(
            BODIES, JOINTS, gravity=lambda p: jnp.stack([0.0, 0.0, -p["g"]])
        ),
        params={"m": 1.0, "h": h, "I1": 0.01, "I3": 0.008, "g": 9.81, "rho": 0.05},
        coordinates=("x", "y", "z", "e0", "e1", "e2", "e3"),
        units=("m", "m", "m", "1", "1", "1", "1"),
        constraint_names=lb.constraint_labels(BODIES, JOINTS),
        multiplier_units=lb.multiplier_units(BODIES, JOINTS),
        q_guess=(0.0, -h * math.sin(theta0), h * math.cos(theta0), *e0),
        qd_guess=(0.0, 0.0, 0.0, *ed0),
        fixed_q=(3, 4, 5, 6),
        fixed_qd=(3, 4, 5, 6),
        points=_points,
        constraint_forces=_constraint_forces,
        segments=((0, 5), (1, 2), (2, 3), (3, 4), (4, 1)),
        conservative=True,
    )
