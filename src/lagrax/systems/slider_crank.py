"""A slider-crank driven by a DC motor: crank, connecting rod and piston."""

import math

import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model
from ._rods import rod_end


CRANK = lb.PlanarBody(0, "m1", lambda p: p["m1"] * p["r"] ** 2 / 12)
ROD = lb.PlanarBody(3, "m2", lambda p: p["m2"] * p["l"] ** 2 / 12)
# The piston: a 4 x 4 cm block (its inertia only keeps M positive definite; the
# cylinder stops it turning).
PISTON = lb.PlanarBody(6, "m3", lambda p: p["m3"] * (0.04**2 + 0.04**2) / 12)
BODIES = (CRANK, ROD, PISTON)


JOINTS = (
    lb.Revolute(lb.GROUND, (0.0, 0.0), CRANK, rod_end("r", -1), name="main bearing"),
    lb.Revolute(CRANK, rod_end("r", 1), ROD, rod_end("l", -1), name="crank pin"),
    lb.Revolute(ROD, rod_end("l", 1), PISTON, None, name="wrist pin"),
    lb.Prismatic(lb.GROUND, PISTON, axis=(1.0, 0.0), name="cylinder"),
)


def motor_torque(t, q, qd, p):
    """A DC motor's torque-speed line: stall torque tau0, no-load speed omega0."""
    return p["tau0"] * (1 - qd[2] / p["omega0"])


def _friction(t, q, qd, p):
    # Viscous friction of the piston in the cylinder.
    return jnp.stack([-p["c"] * qd[6], jnp.zeros_like(qd[6])])


LOADS = (
    lb.BodyTorque(CRANK, motor_torque),
    lb.PointForce(PISTON, None, _friction),
)


def _passive(p):
    # Motor off and no friction: only then is the energy conserved.
    return float(p["tau0"]) == 0.0 and float(p["c"]) == 0.0


def _points(t, q, p):
    return jnp.stack(
        [
            jnp.zeros(2, q.dtype),
            CRANK.position(q, p, rod_end("r", 1)),
            PISTON.position(q, p),
        ]
    )


def positions(theta, p):
    """Closed-form position analysis: (rod angle, piston x) for crank angle theta."""
    r, l = p["r"], p["l"]
    rod = -math.asin(r * math.sin(theta) / l)
    return rod, r * math.cos(theta) + l * math.cos(rod)


def _guess(p, theta):
    rod, x = positions(theta, p)
    r, l = p["r"], p["l"]
    return (
        r / 2 * math.cos(theta), r / 2 * math.sin(theta), theta,
        r * math.cos(theta) + l / 2 * math.cos(rod),
        r * math.sin(theta) + l / 2 * math.sin(rod), rod,
        x, 0.0, 0.0,
    )  # fmt: skip


def slider_crank() -> Model:
    """Crank r = 0.05 m, rod l = 0.2 m, piston m3 = 0.5 kg, horizontal, no gravity.

    Uniform crank and rod (I = m L^2 / 12); the piston slides along the x axis
    through the main bearing (prismatic joint with the ground). A DC motor drives
    the crank: tau = tau0 (1 - omega / omega0) (stall torque 0.5 N m, no-load
    speed 100 rad/s), the piston feels viscous friction c (default 0.02 N s/m).
    Started at rest at crank angle 30 deg: it spins up to a periodic steady state
    where the motor's work balances the friction. 9 coordinates, 8 rows.
    """
    params = {"r": 0.05, "l": 0.2, "m1": 0.3, "m2": 0.4, "m3": 0.5, "tau0": 0.5,
              "omega0": 100.0, "c": 0.02}  # fmt: skip
    return Model(
        name="slider_crank",
        description="slider-crank driven by a DC motor (9 coords, 1 DOF)",
        system=lb.assemble(BODIES, JOINTS, LOADS),
        params=params,
        coordinates=("x1", "y1", "th1", "x2", "y2", "th2", "x3", "y3", "th3"),
        units=("m", "m", "rad") * 3,
        constraint_names=lb.constraint_labels(BODIES, JOINTS),
        multiplier_units=lb.multiplier_units(BODIES, JOINTS),
        q_guess=_guess(params, math.pi / 6),
        qd_guess=(0.0,) * 9,
        fixed_q=(2,),
        fixed_qd=(2,),
        points=_points,
        constraint_forces=lb.joint_forces(BODIES, JOINTS),
        segments=((0, 1), (1, 2)),
        conservative=_passive,
    )
