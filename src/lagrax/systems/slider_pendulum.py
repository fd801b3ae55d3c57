"""A block on a horizontal track, held by a spring, with a bar pinned to it."""

import jax.numpy as jnp

from .._model import Model
from .._system import System


def _lagrangian(t, q, qd, p):
    x1, y1, _, x2, y2, _ = q
    i1 = p["m1"] * (p["a"] ** 2 + p["b"] ** 2) / 12
    i2 = p["m2"] * p["L"] ** 2 / 12
    inertia = jnp.stack([p["m1"], p["m1"], i1, p["m2"], p["m2"], i2])
    kinetic = 0.5 * jnp.sum(inertia * qd**2)
    potential = 0.5 * p["k"] * x1**2 + p["g"] * (p["m1"] * y1 + p["m2"] * y2)
    return kinetic - potential


def _constraints(t, q, p):
    x1, y1, th1, x2, y2, th2 = q
    half = p["L"] / 2
    # Revolute joint: block centre (body 1) = left end of the bar (body 2).
    return jnp.stack(
        [
            y1,
            th1,
            x1 - x2 + half * jnp.cos(th2),
            y1 - y2 + half * jnp.sin(th2),
        ]
    )


def _forces(t, q, qd, p):
    # A viscous damper c in parallel with the spring, acting on x1.
    return jnp.zeros_like(qd).at[0].set(-p["c"] * qd[0])


def _undamped(p):
    return float(p["c"]) == 0.0


def _points(t, q, p):
    x1, y1, _, x2, y2, th2 = q
    half = p["L"] / 2
    tip = jnp.stack([x2 + half * jnp.cos(th2), y2 + half * jnp.sin(th2)])
    # The spring V = k x1^2 / 2 has rest length zero; it is drawn from an anchor
    # one bar length to the left, which gives the same force along the track.
    anchor = jnp.stack([-p["L"], jnp.zeros_like(p["L"])]).astype(q.dtype)
    return jnp.stack([anchor, jnp.stack([x1, y1]), tip])


def _constraint_forces(t, q, lam, params):
    # The track's reaction on the block (y1 = 0 gives the force (0, lam0)), and
    # the pin force on the bar at the block centre (the pin rows are
    # r1 - r_end(q2), so lam[2:] acts on the block and -lam[2:] on the bar).
    block = q[:2]
    track = jnp.stack([jnp.zeros_like(lam[0]), lam[0]])
    return jnp.stack([block, block]), jnp.stack([track, -lam[2:4]])


def slider_pendulum() -> Model:
    """Block (m1 = 0.1 kg, a x b = 0.10 x 0.05 m) on the track y = 0 with a spring.

    The block is held by a spring k = 10 N/m to x1 = 0, with a viscous damper c
    (default 0) in parallel; a uniform bar
    (m2 = 0.3 kg, L = 0.4 m, I2 = m2 L^2 / 12) is pinned at its end to the block
    centre. Absolute coordinates q = (x1, y1, th1, x2, y2, th2) of both bodies'
    mass centres and angles; four constraints: y1 = 0, th1 = 0 (the track) and the
    pin, r1 - (r2 - A(th2) (L/2, 0)) = 0. Released from rest with the bar
    horizontal (x1 = 0 and th2 = 0 fixed, the rest solved). The track moment
    lam[1] stays zero.
    """
    return Model(
        name="slider_pendulum",
        description="block on a sprung horizontal track with a pinned bar (6 coords)",
        system=System(_lagrangian, _constraints, _forces),
        params={
            "m1": 0.1,
            "a": 0.10,
            "b": 0.05,
            "m2": 0.3,
            "L": 0.4,
            "k": 10.0,
            "c": 0.0,
            "g": 9.81,
        },
        coordinates=("x1", "y1", "th1", "x2", "y2", "th2"),
        units=("m", "m", "rad", "m", "m", "rad"),
        constraint_names=("track y1", "track th1", "pin x", "pin y"),
        multiplier_units=("N", "N m", "N", "N"),
        q_guess=(0.0, 0.01, 0.05, 0.15, -0.02, 0.0),
        qd_guess=(0.0,) * 6,
        fixed_q=(0, 5),
        points=_points,
        constraint_forces=_constraint_forces,
        segments=((1, 2),),
        springs=((0, 1),),
        conservative=_undamped,
    )
