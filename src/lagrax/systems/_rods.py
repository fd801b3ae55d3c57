"""Points of uniform rods, as parameter-dependent body-fixed points."""

import jax.numpy as jnp


def rod_end(length: str, sign: float, axis: int = 0):
    """The body-fixed point sign * length / 2 along body axis `axis` (0: x, 1:
    y), `length` the key of a parameter: a Value for lagrax.bodies."""

    def point(p):
        half = sign * jnp.asarray(p[length]) / 2
        zero = jnp.zeros_like(half)
        return jnp.stack([half, zero] if axis == 0 else [zero, half])

    return point
