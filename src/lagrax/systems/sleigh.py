"""The Chaplygin sleigh: a body on a knife edge (a nonholonomic constraint)."""

import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model


SLEIGH = lb.PlanarBody(0, "m", "I")
BODIES = (SLEIGH,)


def _blade(p):
    return jnp.stack([-p["a"], jnp.zeros_like(p["a"])])


BLADE = lb.KnifeEdge(SLEIGH, _blade, (1.0, 0.0), name="blade")


def _points(t, q, p):
    corners = [(-0.15, -0.08), (0.15, -0.08), (0.15, 0.08), (-0.15, 0.08)]
    pts = [SLEIGH.position(q, p, c) for c in corners]
    pts += [SLEIGH.position(q, p, _blade), SLEIGH.position(q, p)]
    return jnp.stack(pts)


def sleigh() -> Model:
    """A sleigh (m = 1 kg, I = 0.02 kg m^2 about its mass centre) on a horizontal
    plane, with a knife edge a = 0.1 m behind the mass centre along the body x
    axis. Coordinates (x, y, theta) of the mass centre; one velocity constraint:
    the blade point cannot move sideways, -xd sin th + yd cos th - a thd = 0
    (Chaplygin 1911; Neimark & Fufaev, *Dynamics of Nonholonomic Systems*).
    Started sliding sideways-and-turning (xd = 0, thd = 2 rad/s): it ends up
    moving straight ahead with all its energy, the hallmark of the sleigh.
    """
    return Model(
        name="sleigh",
        description="Chaplygin sleigh: knife edge, nonholonomic (3 coords)",
        system=lb.assemble(BODIES, velocity_constraints=(BLADE,)),
        params={"m": 1.0, "I": 0.02, "a": 0.1},
        coordinates=("x", "y", "th"),
        units=("m", "m", "rad"),
        constraint_names=lb.constraint_labels(BODIES, velocity_constraints=(BLADE,)),
        multiplier_units=lb.multiplier_units(BODIES, velocity_constraints=(BLADE,)),
        q_guess=(0.0, 0.0, 0.0),
        qd_guess=(0.0, 0.2, 2.0),
        fixed_q=(0, 1, 2),
        fixed_qd=(0, 2),
        points=_points,
        # The blade's sideways force, at the blade, across it.
        constraint_forces=lb.joint_forces(BODIES, velocity_constraints=(BLADE,)),
        segments=((0, 1), (1, 2), (2, 3), (3, 0), (4, 5)),
        conservative=True,  # the blade's force is across its velocity
    )
