"""The Cartesian pendulum: a point mass on a massless rod, |q| = l."""

import jax.numpy as jnp

from .._model import Model
from .._system import System


def _lagrangian(t, q, qd, params):
    m, g = params["m"], params["g"]
    return 0.5 * m * qd @ qd - m * g * q[1]


def _constraints(t, q, params):
    return jnp.stack([q @ q - params["l"] ** 2])


def _points(t, q, params):
    return jnp.stack([jnp.zeros(2, q.dtype), q])


def _constraint_forces(t, q, lam, params):
    # The rod's pull on the bob: J^T lam with J = 2 q^T.
    return q[None], (2 * lam[0] * q)[None]


def pendulum() -> Model:
    """A point mass m at q = (x, y) on a rod of length l from the origin.

    The textbook case for constraint drift: L = m |qd|^2 / 2 - m g y,
    phi = x^2 + y^2 - l^2 (so the rod tension is -2 l lam, radially outward),
    g = 9.81, m = 2, l = 2.5, released at rest from (0.86, 2.35) projected onto
    the circle, near the top: lam(0) = 3.69.
    """
    return Model(
        name="pendulum",
        description="point mass on a rod in Cartesian coordinates (x, y), |q| = l",
        system=System(_lagrangian, _constraints),
        params={"m": 2.0, "l": 2.5, "g": 9.81},
        coordinates=("x", "y"),
        units=("m", "m"),
        constraint_names=("rod length",),
        multiplier_units=("N/m",),  # J^T lam = 2 lam q is a force
        q_guess=(0.86, 2.35),
        qd_guess=(0.0, 0.0),
        points=_points,
        constraint_forces=_constraint_forces,
        segments=((0, 1),),
        conservative=True,
    )
