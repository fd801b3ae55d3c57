"""An N-link chain of uniform rods hanging from a pin, built from bodies."""

import math

import jax.numpy as jnp

from .. import bodies as lb
from .._model import Model
from ._rods import rod_end


UP, DOWN = rod_end("l", 1, axis=1), rod_end("l", -1, axis=1)  # the rod's ends


def _parts(n):
    inertia = lambda p: p["m"] * p["l"] ** 2 / 12  # noqa: E731
    links = tuple(lb.PlanarBody(3 * k, "m", inertia) for k in range(n))
    # Each link's frame has its axis along +y: theta = 0 hangs straight down
    # when the upper end (0, l/2) is above the centre.
    joints = [lb.Revolute(lb.GROUND, (0.0, 0.0), links[0], UP, name="pin 0")]
    joints += [
        lb.Revolute(links[k - 1], DOWN, links[k], UP, name=f"pin {k}")
        for k in range(1, n)
    ]
    return links, tuple(joints)


def chain(n: int = 5) -> Model:
    """n uniform rods (mass m = 0.1 kg, length l = 0.2 m each) pinned end to end.

    The first hangs from a pin at the origin. Absolute coordinates (x, y, theta)
    of every rod: 3 n coordinates, 2 n rows, n degrees of freedom (theta = 0
    hangs down). Released from rest as a straight chain 60 deg from the vertical,
    with the angles kept and the positions solved.
    """
    if n < 1:
        raise ValueError(f"chain: n must be at least 1, got {n}.")
    links, joints = _parts(n)
    l = 0.2
    angle = math.pi / 3
    guess = []
    for k in range(n):
        s = (k + 0.5) * l
        guess += [s * math.sin(angle), -s * math.cos(angle), angle]

    def points(t, q, p):
        ends = [jnp.zeros(2, q.dtype)]
        ends += [link.position(q, p, DOWN) for link in links]
        return jnp.stack(ends)

    return Model(
        name="chain",
        description=f"{n}-link chain of rods hanging from a pin ({3 * n} coords)",
        system=lb.assemble(links, joints, gravity=lambda p: jnp.stack([0.0, -p["g"]])),
        params={"m": 0.1, "l": l, "g": 9.81},
        coordinates=tuple(f"{c}{k + 1}" for k in range(n) for c in ("x", "y", "th")),
        units=("m", "m", "rad") * n,
        constraint_names=lb.constraint_labels(links, joints),
        multiplier_units=lb.multiplier_units(links, joints),
        q_guess=tuple(guess),
        qd_guess=(0.0,) * (3 * n),
        fixed_q=tuple(3 * k + 2 for k in range(n)),
        fixed_qd=tuple(3 * k + 2 for k in range(n)),
        points=points,
        constraint_forces=lb.joint_forces(links, joints),
        segments=tuple((k, k + 1) for k in range(n)),
        conservative=True,
    )
