"""Quaternions (w, x, y, z), MuJoCo's and lagrax's convention: the products and
rotations that MuJoCo's kinematics composes."""

import jax.numpy as jnp

from ._body import quaternion_rotation


def qmul(a, b):
    """The Hamilton product a b: R(a b) = R(a) R(b); batched over leading axes."""
    w1, v1 = a[..., :1], a[..., 1:]
    w2, v2 = b[..., :1], b[..., 1:]
    return jnp.concatenate(
        [
            w1 * w2 - jnp.sum(v1 * v2, -1, keepdims=True),
            w1 * v2 + w2 * v1 + jnp.cross(v1, v2),
        ],
        -1,
    )


def qconj(a):
    """The conjugate: the inverse of a unit quaternion."""
    return a * jnp.array([1.0, -1.0, -1.0, -1.0], a.dtype)


def axis_angle(axis, angle):
    """The rotation by `angle` about the unit vector `axis`."""
    return jnp.concatenate(
        [jnp.atleast_1d(jnp.cos(angle / 2)), jnp.sin(angle / 2) * axis]
    )


def rotate(quat, v):
    """v rotated by the unit quaternion `quat`."""
    return quaternion_rotation(quat) @ v
