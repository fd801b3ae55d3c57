"""A cart-pole in Cartesian (absolute) coordinates: two bodies, a rail and a pin."""

import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model


# The cart: a 0.3 x 0.1 m block (the rail keeps it from turning).
CART = lb.PlanarBody(0, "M", lambda p: p["M"] * (0.3**2 + 0.1**2) / 12)
POLE = lb.PlanarBody(3, "m", lambda p: p["m"] * (2 * p["l"]) ** 2 / 12)
BODIES = (CART, POLE)


def _foot(p):
    # The pole's lower end, a distance l below its mass centre along its axis.
    return jnp.stack([jnp.zeros_like(p["l"]), -p["l"]])


JOINTS = (
    lb.Prismatic(lb.GROUND, CART, axis=(1.0, 0.0), name="rail"),
    lb.Revolute(CART, None, POLE, _foot, name="pivot"),
)


def push(t, q, qd, p):
    """The horizontal force on the cart: F0 sin(omega t)."""
    force = p["F0"] * jnp.sin(p["omega"] * t)
    return jnp.stack([force, jnp.zeros_like(force)])


LOADS = (lb.PointForce(CART, None, push),)


def _unpushed(p):
    return float(p["F0"]) == 0.0


def _points(t, q, p):
    return jnp.stack(
        [
            CART.position(q, p),
            POLE.position(q, p, lambda p_: -_foot(p_)),
        ]
    )


def cart_pole() -> Model:
    """Cart M = 1 kg on a horizontal rail, pole m = 0.2 kg of half-length l = 0.5 m.

    Absolute coordinates (x, y, theta) of cart and pole (theta of the pole
    measured from the upright, counter-clockwise); the rail keeps y = 0 and
    theta = 0 of the cart, the pin joins the cart centre to the pole's foot.
    A force F0 sin(omega t) pushes the cart (default F0 = 1 N, omega = 2 rad/s).
    Starts at rest with the pole 0.2 rad from upright; it falls and swings.
    """
    l = 0.5
    return Model(
        name="cart_pole",
        description="cart-pole in Cartesian coordinates (6 coords, 2 DOF)",
        system=lb.assemble(
            BODIES, JOINTS, LOADS, gravity=lambda p: jnp.stack([0.0, -p["g"]])
        ),
        params={"M": 1.0, "m": 0.2, "l": l, "g": 9.81, "F0": 1.0, "omega": 2.0},
        coordinates=("x_cart", "y_cart", "th_cart", "x_pole", "y_pole", "th_pole"),
        units=("m", "m", "rad") * 2,
        constraint_names=lb.constraint_labels(BODIES, JOINTS),
        multiplier_units=lb.multiplier_units(BODIES, JOINTS),
        q_guess=(0.0, 0.0, 0.0, -l * 0.2, l, 0.2),
        qd_guess=(0.0,) * 6,
        fixed_q=(0, 5),
        fixed_qd=(0, 5),
        points=_points,
        constraint_forces=lb.joint_forces(BODIES, JOINTS),
        segments=((0, 1),),
        conservative=_unpushed,
    )
