"""How spatial models are drawn in the plane."""

import jax.numpy as jnp


def cabinet(r):
    """A cabinet projection of a world point: y recedes up and to the right at
    half scale."""
    return jnp.stack([r[0] + 0.35 * r[1], r[2] + 0.35 * r[1]])
