"""A double pendulum in non-minimal Cartesian coordinates, with a torsion spring."""

import jax.numpy as jnp

from .._model import Model
from .._system import System


def _angular_rate(r, v):
    return (r[0] * v[1] - r[1] * v[0]) / (r @ r)


def _tips(q):
    """Absolute positions of the two tips (mass centres)."""
    return q[:2], q[:2] + q[2:]


def _lagrangian(t, q, qd, p):
    m, l, g, k = p["m"], p["l"], p["g"], p["k"]
    inertia = m * l**2 / 3
    (r1, r2), (v1, v2) = _tips(q), _tips(qd)  # the tips are linear in q
    w1 = _angular_rate(q[:2], qd[:2])
    w2 = _angular_rate(q[2:], qd[2:])
    kinetic = 0.5 * m * (v1 @ v1 + v2 @ v2) + 0.5 * inertia * (w1**2 + w2**2)
    cross = q[0] * q[3] - q[1] * q[2]
    relative = jnp.arctan2(cross, q[:2] @ q[2:])
    potential = m * g * (r1[1] + r2[1]) + 0.5 * k * relative**2
    return kinetic - potential


def _constraints(t, q, p):
    return jnp.stack([q[:2] @ q[:2] - p["l"] ** 2, q[2:] @ q[2:] - p["l"] ** 2])


def _forces(t, q, qd, p):
    # Viscous friction -c v at each tip, mapped to coordinates by J_r^T f with
    # J_r the (constant) Jacobian of the tip positions.
    v1, v2 = _tips(qd)
    return -p["c"] * jnp.concatenate([v1 + v2, v2])


def _undamped(p):
    return float(p["c"]) == 0.0


def _points(t, q, params):
    r1, r2 = _tips(q)
    return jnp.stack([jnp.zeros(2, q.dtype), r1, r2])


def _constraint_forces(t, q, lam, params):
    # Each length constraint pulls along its link, at the link's tip.
    r1, r2 = _tips(q)
    return jnp.stack([r1, r2]), jnp.stack([2 * lam[0] * q[:2], 2 * lam[1] * q[2:]])


def double_pendulum() -> Model:
    """Two links (m = 1, l = 2) in Cartesian coordinates, with a torsion spring.

    q = (x1, y1, x2, y2): the tip of link 1, and the tip of link 2 relative to
    tip 1. Each link is a rigid body with its mass centre at its tip and central
    moment of inertia m l^2 / 3, so T = sum m |v_tip|^2 / 2 + (m l^2 / 3) w^2 / 2
    (v_tip absolute, w the link's angular rate). Gravity g = 9.81; a torsion
    spring k = 17.5 between the links, V = k a^2 / 2 with a the relative angle;
    viscous friction c (default 0) on the tip velocities. Constraints
    x1^2 + y1^2 = l^2 and x2^2 + y2^2 = l^2. Starts at all coordinates
    l / sqrt(2) with velocities (1, -1, 1, -1). With c = 0 energy is conserved.
    """
    start = 2.0 / 2.0**0.5
    return Model(
        name="double_pendulum",
        description="double pendulum in Cartesian tip coordinates, torsion spring",
        system=System(_lagrangian, _constraints, _forces),
        params={"m": 1.0, "l": 2.0, "g": 9.81, "k": 17.5, "c": 0.0},
        coordinates=("x1", "y1", "x2", "y2"),
        units=("m", "m", "m", "m"),
        constraint_names=("link 1 length", "link 2 length"),
        multiplier_units=("N/m", "N/m"),  # J^T lam = 2 lam (x, y) are forces
        q_guess=(start,) * 4,
        qd_guess=(1.0, -1.0, 1.0, -1.0),
        points=_points,
        constraint_forces=_constraint_forces,
        segments=((0, 1), (1, 2)),
        conservative=_undamped,
    )
