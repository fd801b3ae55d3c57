"""MuJoCo's joint-space loads: joint damping (a force), armature (a kinetic
energy) and joint springs (a potential), through a model's JointSpace."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .._mechanics import AbstractLagrangian, lagrangian_terms
from ._body import resolve
from ._joint_space import JointSpace
from ._loads import AbstractForce


class _DofDamping(AbstractForce):
    """MuJoCo's joint damping: the generalized force -W^T (d * qvel), qvel the
    joint velocities (linear in qd, qvel = W qd)."""

    joint_space: JointSpace
    damping: tuple[Any, ...]  # per dof: a number or a key of params

    def force(self, t, q, qd, params):
        d = jnp.stack([resolve(c, params, q.dtype) for c in self.damping])

        def qvel(qd_):
            return self.joint_space.joint_velocities(q, qd_)

        rate, pullback = jax.vjp(qvel, qd)
        return -pullback(d * rate)[0]


class _JointEnergies(AbstractLagrangian):
    """The Lagrangian plus MuJoCo's joint-space energies: armature (rotor
    inertia), sum_k a_k qvel_k^2 / 2 with qvel = W(q) qd, exactly MuJoCo's a_k
    on the diagonal of its joint-space mass matrix; and joint springs, minus
    sum_j k_j (qpos_j - qpos_spring_j)^2 / 2 for hinges and slides. M and f are
    the bodies' (block diagonal, from `assemble`) plus those of the joint
    energies alone, differentiated on their own."""

    lagrangian: Any
    joint_space: JointSpace
    armature: tuple[Any, ...]  # per dof: 0.0 or a key of params
    springs: tuple[tuple[int, Any, float], ...]  # (joint index, k key, rest)

    def __call__(self, t, q, qd, params):
        return self.lagrangian(t, q, qd, params) + self._joints(t, q, qd, params)

    def _joints(self, t, q, qd, params):
        out = jnp.zeros((), q.dtype)
        if any(not isinstance(c, float) for c in self.armature):
            qvel = self.joint_space.joint_velocities(q, qd)
            a = jnp.stack([resolve(c, params, q.dtype) for c in self.armature])
            out = out + 0.5 * jnp.sum(a * qvel**2)
        if self.springs:
            sprung = [self.joint_space.joints[j] for j, _, _ in self.springs]
            values = self.joint_space._joint_values(q, sprung)
            for value, (_, key, rest) in zip(values, self.springs, strict=True):
                k = resolve(key, params, q.dtype)
                out = out - 0.5 * k * (value[0] - rest) ** 2
        return out

    def terms(self, t, q, qd, params):
        mass, force = lagrangian_terms(self.lagrangian, t, q, qd, params)
        mass_j, force_j = lagrangian_terms(self._joints, t, q, qd, params)
        return mass + mass_j, force + force_j

    def mass(self, t, q, qd, params):
        inner = self.lagrangian
        if isinstance(inner, AbstractLagrangian):
            mass = inner.mass(t, q, qd, params)
        else:
            mass = lagrangian_terms(inner, t, q, qd, params)[0]
        return mass + jax.jacfwd(jax.grad(self._joints, argnums=2), argnums=2)(
            t, q, qd, params
        )


def _per_dof(nv: int, pairs) -> tuple[Any, ...]:
    """Per dof: the params key of its (dof, key) pair, else 0.0."""
    keys: list[Any] = [0.0] * nv
    for d, key in pairs:
        keys[d] = key
    return tuple(keys)


def _with_joint_energies(system, joint_space, nv, armature, springs):
    lagrangian = _JointEnergies(
        system.lagrangian, joint_space, _per_dof(nv, armature), tuple(springs)
    )
    return eqx.tree_at(lambda s: s.lagrangian, system, lagrangian)
