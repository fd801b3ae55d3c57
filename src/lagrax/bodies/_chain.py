"""`ChainBody`: a rigid body whose coordinates are the values of the hinges and
slides that move it from its parent (a MuJoCo body with several joints)."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._custom_types import Params
from ._body import (
    AbstractBody,
    Value,
    _body_rate_matrix,
    _local,
    matvec,
    quaternion_rotation,
    resolve,
)
from ._joint_space import _Joint, _move_by, _pose
from ._quaternions import qmul, rotate


class ChainBody(AbstractBody):
    """A rigid body moved from its parent by a chain of hinges and slides (a
    MuJoCo body with several joints, e.g. the planar root of hopper or the hip
    of humanoid): its coordinates are the joint values themselves, and its pose
    is the parent's composed with the joints, as MuJoCo composes them.

    The joints of one body share no massless bodies between them, so absolute
    coordinates would need a body without inertia for each; in joint
    coordinates the body's kinetic energy, m |v|^2 / 2 + omega^T I omega / 2
    through the chain, keeps the mass matrix positive definite, and the joints
    need no constraint rows.
    """

    index: int = eqx.field(static=True)
    mass: Value
    inertia: Value
    parent: Any  # GROUND_3D, a SpatialBody or a ChainBody
    # The body's frame before its joints, in the parent's frame.
    offset_pos: tuple[float, ...] = eqx.field(static=True)
    offset_quat: tuple[float, ...] = eqx.field(static=True)
    joints: tuple[_Joint, ...] = eqx.field(static=True)
    # The principal inertial frame in the body's frame after its joints.
    principal_pos: tuple[float, ...] = eqx.field(static=True)
    principal_quat: tuple[float, ...] = eqx.field(static=True)

    @property
    def size(self) -> int:
        return len(self.joints)

    @property
    def dim(self) -> int:
        return 3

    def pose(self, q):
        """World position and quaternion of the principal frame."""
        dtype = q.dtype
        x, e = _pose(self.parent, q)
        x = x + rotate(e, jnp.asarray(self.offset_pos, dtype))
        e = qmul(e, jnp.asarray(self.offset_quat, dtype))
        for i, joint in enumerate(self.joints):
            x, e = _move_by(joint, q[self.index + i : self.index + i + 1], x, e)
        x = x + rotate(e, jnp.asarray(self.principal_pos, dtype))
        return x, qmul(e, jnp.asarray(self.principal_quat, dtype))

    def rotation(self, q) -> Array:
        """The rotation matrix principal frame -> world."""
        return quaternion_rotation(self.pose(q)[1])

    def position(self, q, params: Params, local: Value = None) -> Array:
        x, e = self.pose(q)
        return x + matvec(quaternion_rotation(e), _local(local, params, q.dtype, 3))

    def _rates(self, q, qd):
        (_, e), (xd, ed) = jax.jvp(self.pose, (q,), (qd,))
        return e, xd, 2 * matvec(_body_rate_matrix(e), ed)

    def angular_velocity(self, q, qd) -> Array:
        e, _, omega = self._rates(q, qd)
        return matvec(quaternion_rotation(e), omega)

    def kinetic_energy(self, q, qd, params: Params) -> Array:
        m = resolve(self.mass, params, q.dtype)
        inertia = resolve(self.inertia, params, q.dtype)
        inertia = jnp.diag(inertia) if inertia.shape == (3,) else inertia
        _, xd, omega = self._rates(q, qd)
        return 0.5 * (m * jnp.sum(xd**2) + jnp.sum(omega * matvec(inertia, omega)))

    def own_constraints(self, q) -> Array:
        return jnp.zeros((0,), q.dtype)
