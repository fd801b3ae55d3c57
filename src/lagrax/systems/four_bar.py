"""A planar four-bar linkage (a closed loop), built from bodies and pins."""

import math

import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model
from ._rods import rod_end


def _rod(index, mass, length):
    return lb.PlanarBody(index, mass, lambda p: p[mass] * p[length] ** 2 / 12)


CRANK, COUPLER, ROCKER = _rod(0, "m1", "a"), _rod(3, "m2", "b"), _rod(6, "m3", "c")
JOINTS = (
    lb.Revolute(lb.GROUND, (0.0, 0.0), CRANK, rod_end("a", -1), name="O2"),
    lb.Revolute(CRANK, rod_end("a", 1), COUPLER, rod_end("b", -1), name="A"),
    lb.Revolute(COUPLER, rod_end("b", 1), ROCKER, rod_end("c", 1), name="B"),
    lb.Revolute(lb.GROUND, lambda p: jnp.stack([p["d"], 0.0]), ROCKER, rod_end("c", -1),
                name="O4"),
)  # fmt: skip
BODIES = (CRANK, COUPLER, ROCKER)


def _points(t, q, p):
    return jnp.stack(
        [
            jnp.zeros(2, q.dtype),
            CRANK.position(q, p, rod_end("a", 1)),
            COUPLER.position(q, p, rod_end("b", 1)),
            jnp.stack([p["d"], jnp.zeros_like(p["d"])]).astype(q.dtype),
            COUPLER.position(q, p),
        ]
    )


def positions(theta2, p):
    """Closed-form position analysis (open branch): the angles of coupler and
    rocker for a crank angle theta2 (Freudenstein; Norton, *Design of Machinery*,
    ch. 4), in floats."""
    a, b, c, d = p["a"], p["b"], p["c"], p["d"]
    ax, ay = a * math.cos(theta2), a * math.sin(theta2)
    # B lies on the circle |B - A| = b and on |B - O4| = c: intersect them.
    ex, ey = d - ax, -ay
    dist = math.hypot(ex, ey)
    along = (b**2 - c**2 + dist**2) / (2 * dist)
    across = math.sqrt(b**2 - along**2)
    bx = ax + (along * ex - across * ey) / dist
    by = ay + (along * ey + across * ex) / dist
    return math.atan2(by - ay, bx - ax), math.atan2(by, bx - d)


def _guess(p, theta2):
    th3, th4 = positions(theta2, p)
    a, b, c = p["a"], p["b"], p["c"]
    ax, ay = a * math.cos(theta2), a * math.sin(theta2)
    return (
        ax / 2, ay / 2, theta2,
        ax + b / 2 * math.cos(th3), ay + b / 2 * math.sin(th3), th3,
        p["d"] + c / 2 * math.cos(th4), c / 2 * math.sin(th4), th4,
    )  # fmt: skip


def four_bar() -> Model:
    """Crank a = 0.1 m, coupler b = 0.35 m, rocker c = 0.3 m, ground d = 0.4 m.

    Uniform rods (masses m1, m2, m3, I = m L^2 / 12) in absolute coordinates
    (x, y, theta) of each mass centre: 9 coordinates, 4 pins (8 rows), one
    degree of freedom. Grashof crank-rocker (a + d < b + c): the crank turns
    fully. Gravity g along -y. Starts at crank angle 60 deg turning at 8 rad/s
    (both kept; the rest solved on the open branch).
    """
    params = {"a": 0.1, "b": 0.35, "c": 0.3, "d": 0.4, "m1": 0.5, "m2": 1.0,
              "m3": 0.8, "g": 9.81}  # fmt: skip
    return Model(
        name="four_bar",
        description="planar four-bar linkage, crank-rocker (9 coords, closed loop)",
        system=lb.assemble(BODIES, JOINTS, gravity=lambda p: jnp.stack([0.0, -p["g"]])),
        params=params,
        coordinates=("x1", "y1", "th1", "x2", "y2", "th2", "x3", "y3", "th3"),
        units=("m", "m", "rad") * 3,
        constraint_names=lb.constraint_labels(BODIES, JOINTS),
        multiplier_units=lb.multiplier_units(BODIES, JOINTS),
        q_guess=_guess(params, math.pi / 3),
        qd_guess=(0.0, 0.0, 8.0) + (0.0,) * 6,
        fixed_q=(2,),
        fixed_qd=(2,),
        points=_points,
        constraint_forces=lb.joint_forces(BODIES, JOINTS),
        segments=((0, 1), (1, 2), (2, 3)),
        conservative=True,
    )
