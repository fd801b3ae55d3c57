"""The Lagrangian of a kinematic tree, with its mass matrix and forces from the
joints' spatial motions (one pass of forward kinematics) instead of autodiff of
the whole Lagrangian.

Each degree of freedom k moves the bodies below it with the spatial motion S_k
(Plucker coordinates about the world origin: (u, r x u) for a turn about the
axis u through r, (0, u) for a slide), read off the forward kinematics. With
static 0/1 matrices P (dof k moves body b) and C (dof k' moves the frame that
carries dof k's axis), the bodies' velocities are V = P (S qvel), their
accelerations at qdd = 0 A = P ((C S qvel) x S qvel) (dS/dt = V_carrier x S), and
their Jacobians P masks of S. Projecting each body's Newton-Euler equations onto
the joint motions (d'Alembert; Kane's equations, the "TMT" method of
Schwertassek and Wallrapp, *Dynamik flexibler Mehrkoerpersysteme*, 1999; the
spatial algebra of Featherstone, *Rigid Body Dynamics Algorithms*, 2008) gives

    M = sum_b m_b Jv_b^T Jv_b + Jw_b^T I_b Jw_b,
    f = sum_b Jv_b^T m_b (g - a_b) - Jw_b^T (I_b alpha_b + omega_b x I_b omega_b),

exactly the M and f that autodiff of L = T - V gives (tests/test_tree.py checks
it), in a few batched products over the bodies and dofs: no per-body,
per-coordinate or per-level code beyond the forward kinematics. See
docs/tree.md.

A unit quaternion's rate edot also carries a radial part that moves nothing;
the term c (e . edot)^2 / 2 (zero on every motion that keeps |e| = 1) keeps M
positive definite, as for lagrax's SpatialBody, and the quaternion's norm row
(a constraint) keeps |e| = 1.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._custom_types import Params
from .._mechanics import AbstractLagrangian
from ._body import Value, resolve
from ._kinematic_tree import (
    KinematicTree,
    cross_motion,
    matmul,
    matvec,
    one_hot,
    place,
)


def _vee(w) -> Array:
    """The axial vector of the antisymmetric part of w (..., 3, 3)."""
    return 0.5 * jnp.stack(
        [
            w[..., 2, 1] - w[..., 1, 2],
            w[..., 0, 2] - w[..., 2, 0],
            w[..., 1, 0] - w[..., 0, 1],
        ],
        axis=-1,
    )


class TreeLagrangian(AbstractLagrangian):
    """L = T - V of the bodies of a `KinematicTree` under gravity, plus an
    optional joint-space Lagrangian (armature, joint springs) differentiated on
    its own.

    **Fields:**

    - `tree`: the kinematic tree.
    - `com`: (nb, 3) every body's mass centre in its frame (static).
    - `principal`: (nb, 3, 3) every body's principal axes in its frame (static).
    - `masses`, `inertias`: per body, a [`lagrax.bodies.Value`][]: the mass and
        the principal moments (3,) (parameters to fit).
    - `gravity`: the gravity vector (a Value) or None.
    - `quaternions`: the index in q of each unit quaternion (ball, free joints),
        with `radial`, the coefficient of its radial term (any positive number:
        it changes neither the motion nor the energy).
    - `armature`: (dof, Value) pairs: rotor inertias a_k, the kinetic energy
        a_k qvel_k^2 / 2 (MuJoCo's armature: a_k on M's diagonal in qvel).
    - `springs`: (index in q, Value, rest) of hinges and slides: the potential
        k (q_i - rest)^2 / 2 (MuJoCo's joint stiffness).
    - `body_names`: the bodies' names, in the tree's order (for reports).
    """

    tree: KinematicTree
    com: tuple[float, ...] = eqx.field(static=True)
    principal: tuple[float, ...] = eqx.field(static=True)
    masses: tuple[Value, ...]
    inertias: tuple[Value, ...]
    gravity: Value
    quaternions: tuple[int, ...] = eqx.field(static=True)
    radial: tuple[float, ...] = eqx.field(static=True)
    armature: tuple[tuple[int, Value], ...] = ()
    springs: tuple[tuple[int, Value, float], ...] = ()
    body_names: tuple[str, ...] = eqx.field(static=True, default=())

    def frames(self, q) -> tuple[Array, Array]:
        """Every body's rotation R_b (nb, 3, 3) and mass centre c_b (nb, 3)."""
        rot, origin = self.tree.poses(q)
        com = jnp.asarray(np.reshape(self.com, (-1, 3)), q.dtype)
        return rot, origin + matvec(rot, com)

    def _inertia(self, params, rot) -> tuple[Array, Array]:
        """Masses (nb,) and world inertia tensors about the mass centres."""
        dtype = rot.dtype
        mass = jnp.stack([resolve(m, params, dtype) for m in self.masses])
        moments = jnp.stack([resolve(i, params, dtype) for i in self.inertias])
        axes = matmul(rot, jnp.asarray(np.reshape(self.principal, (-1, 3, 3)), dtype))
        return mass, matmul(axes * moments[:, None, :], jnp.swapaxes(axes, -1, -2))

    def _gravity(self, params, dtype) -> Array:
        if self.gravity is None:
            return jnp.zeros(3, dtype)
        return resolve(self.gravity, params, dtype)

    def _identity_map(self) -> bool:
        """Whether qvel = qd (hinges and slides only, in MuJoCo's order)."""
        tree = self.tree
        return (
            tree.nq == tree.nv
            and tree.qposadr == tree.dofadr
            and all(k in ("hinge", "slide") for k in tree.kinds)
        )

    def _quaternion_rates(self, q, qd):
        index = np.asarray(self.quaternions, int)[:, None] + np.arange(4)
        return q[index], qd[index], index

    def __call__(self, t, q, qd, params: Params) -> Array:
        (rot, com), (rot_dot, com_dot) = jax.jvp(self.frames, (q,), (qd,))
        mass, inertia = self._inertia(params, rot)
        omega = _vee(matmul(rot_dot, jnp.swapaxes(rot, -1, -2)))
        kinetic = 0.5 * (
            jnp.sum(mass * jnp.sum(com_dot**2, -1))
            + jnp.sum(omega * matvec(inertia, omega))
        )
        if self.quaternions:
            e, ed, _ = self._quaternion_rates(q, qd)
            radial = jnp.asarray(self.radial, q.dtype)
            kinetic = kinetic + 0.5 * jnp.sum(radial * jnp.sum(e * ed, -1) ** 2)
        gravity = self._gravity(params, q.dtype)
        out = kinetic + jnp.sum(mass * (com @ gravity))
        if self.armature:
            qvel = self.tree.velocity_map(q, qd)[0] @ qd
            dof, a = self._armature(params, q.dtype)
            out = out + 0.5 * jnp.sum(a * qvel[dof] ** 2)
        if self.springs:
            index, k, rest = self._springs(params, q.dtype)
            out = out - 0.5 * jnp.sum(k * (q[index] - rest) ** 2)
        return out

    def _armature(self, params, dtype):
        dof = np.asarray([d for d, _ in self.armature], int)
        return dof, jnp.stack([resolve(a, params, dtype) for _, a in self.armature])

    def _springs(self, params, dtype):
        index = np.asarray([i for i, _, _ in self.springs], int)
        k = jnp.stack([resolve(v, params, dtype) for _, v, _ in self.springs])
        return index, k, jnp.asarray([r for _, _, r in self.springs], dtype)

    def _motion(self, q, qd) -> dict[str, Any]:
        """Every dof's spatial motion and every body's velocity and
        acceleration at qdd = 0, from one pass of forward kinematics."""
        tree = self.tree
        dtype = q.dtype
        _, _, _, _, _, path, carrier = tree.dofs()
        motion, body_rot, body_pos = tree.motions(q)
        spin = motion[:, :3]

        if self._identity_map():
            qvel, rate_bias, velocity_map = qd, None, None
        else:
            velocity_map, rate_bias = tree.velocity_map(q, qd)
            qvel = velocity_map @ qd
        # Velocities and the accelerations at qdd = 0 (the frame carrying a
        # dof's direction moves it: dS/dt = V_carrier x S), for every body.
        moving = motion * qvel[:, None]  # (nv, 6)
        path_ = jnp.asarray(path, dtype)
        velocity = path_ @ moving  # (nb, 6): (omega, v of the point at 0)
        carried = jnp.asarray(carrier, dtype) @ moving
        bias = path_ @ cross_motion(carried, moving)  # (nb, 6)

        com = jnp.asarray(np.reshape(self.com, (-1, 3)), dtype)
        centre = body_pos + matvec(body_rot, com)
        omega, v_origin = velocity[:, :3], velocity[:, 3:]
        alpha, a_origin = bias[:, :3], bias[:, 3:]
        v_centre = v_origin + jnp.cross(omega, centre)
        acc = a_origin + jnp.cross(alpha, centre) + jnp.cross(omega, v_centre)
        return dict(
            motion=motion, spin=spin, qvel=qvel, velocity_map=velocity_map,
            rate_bias=rate_bias, path=path_, body_rot=body_rot, body_pos=body_pos,
            centre=centre, omega=omega, alpha=alpha, acc=acc, v_centre=v_centre,
        )  # fmt: skip

    def terms(self, t, q, qd, params: Params) -> tuple[Array, Array]:
        dtype = q.dtype
        k = self._motion(q, qd)
        motion, spin, path_, centre = k["motion"], k["spin"], k["path"], k["centre"]
        omega, alpha, acc, body_rot = k["omega"], k["alpha"], k["acc"], k["body_rot"]
        velocity_map, rate_bias = k["velocity_map"], k["rate_bias"]

        # Body Jacobians (nb, 3, nv): angular, and of the mass centre.
        jac_w = path_[:, None, :] * spin.T[None]
        jac_v = path_[:, None, :] * (
            motion[:, 3:].T[None]
            + jnp.cross(spin[None], centre[:, None], axis=-1).swapaxes(1, 2)
        )
        mass, inertia = self._inertia(params, body_rot)
        gravity = self._gravity(params, q.dtype)
        # Each body's 6 x n Jacobian and Newton-Euler load, stacked: M and f
        # are then one contraction each over the bodies.
        jac = jnp.concatenate([jac_v, jac_w], axis=1)
        weighted = jnp.concatenate(
            [
                mass[:, None, None] * jac_v,
                jnp.sum(inertia[:, :, :, None] * jac_w[:, None, :, :], axis=2),
            ],
            axis=1,
        )
        momentum = matvec(inertia, omega)
        load = jnp.concatenate(
            [
                mass[:, None] * (gravity - acc),
                -(matvec(inertia, alpha) + jnp.cross(omega, momentum)),
            ],
            axis=1,
        )
        mass_matrix = jnp.einsum("bin,bim->nm", jac, weighted)
        force = jnp.einsum("bin,bi->n", jac, load)
        if self.armature:  # in qvel, before the map to qd below
            dof, a = self._armature(params, dtype)
            mass_matrix = mass_matrix + jnp.diag(place(a, dof, mass_matrix.shape[0]))
        if velocity_map is not None:  # qvel = G qd: d/dt qvel = G qdd + G' qd
            force = velocity_map.T @ (force - mass_matrix @ rate_bias)
            mass_matrix = velocity_map.T @ mass_matrix @ velocity_map
        if self.springs:
            index, k, rest = self._springs(params, dtype)
            force = force - place(k * (q[index] - rest), index, force.shape[0])
        if self.quaternions:
            e, ed, index = self._quaternion_rates(q, qd)
            radial = jnp.asarray(self.radial, q.dtype)
            placed = jnp.einsum("kjn,kj->kn", one_hot(index, q.shape[0], dtype), e)
            mass_matrix = mass_matrix + jnp.einsum(
                "k,kn,km->nm", radial, placed, placed
            )
            force = force - (radial * jnp.sum(ed**2, -1)) @ placed
        return mass_matrix, force

    def joint_reactions(self, t, q, qd, qdd, params: Params) -> tuple[Array, Array]:
        """The force and torque (world components, (nb, 3) each) that each
        body's parent exerts on it through its joints at the motion (q, qd,
        qdd): the Newton-Euler equations of the subtree it carries, summed from
        the leaves (the backward pass of the recursive Newton-Euler algorithm;
        Featherstone 2008, ch. 5.3). The torque is about the body frame's
        origin (MuJoCo's xpos). Bodies are in depth order (`tree.parent`);
        forces of loop closures are not included (refused).

        The force along a joint's axis is what drives it (damping, springs,
        actuation); the rest is the reaction that lagrax's multipliers gave in
        absolute coordinates.
        """
        dtype = q.dtype
        k = self._motion(q, qd)
        qvel_rate = qdd if k["velocity_map"] is None else k["velocity_map"] @ qdd
        change = k["path"] @ (k["motion"] * qvel_rate[:, None])  # (nb, 6)
        alpha = k["alpha"] + change[:, :3]
        centre, omega = k["centre"], k["omega"]
        acc = k["acc"] + change[:, 3:] + jnp.cross(change[:, :3], centre)
        mass, inertia = self._inertia(params, k["body_rot"])
        gravity = self._gravity(params, dtype)
        force = mass[:, None] * (acc - gravity)
        torque = matvec(inertia, alpha) + jnp.cross(omega, matvec(inertia, omega))
        moment = torque + jnp.cross(centre, force)  # about the world origin
        below = np.eye(self.tree.num_bodies)
        for b in reversed(range(self.tree.num_bodies)):  # children come later
            up = self.tree.parent[b]
            if up >= 0:
                below[up] += below[b]
        below = jnp.asarray(below, dtype)
        force, moment = below @ force, below @ moment
        return force, moment - jnp.cross(k["body_pos"], force)


def joint_reactions(model, t, q, qd, qdd, params: Params | None = None):
    """What each body's joints carry, for a tree model: the force and torque its
    parent exerts on it through its joints, from the Newton-Euler backward pass
    (`TreeLagrangian.joint_reactions`). The tree joints' reactions that, in
    absolute coordinates, lagrax's multipliers gave.

    **Arguments:**

    - `model`: a tree model (`lb.from_mjcf` / `lb.from_urdf` in joint
        coordinates) without loop closures.
    - `t`, `q`, `qd`, `qdd`: the motion (e.g. `sol.ts[i]`, `sol.q[i]`,
        `sol.qd[i]`, `sol.qdd[i]`; vmap for a whole trajectory).
    - `params`: default the model's.

    **Returns:**

    `(names, force, torque)`: the bodies' names and (nb, 3) world components,
    the torque about each body frame's origin (MuJoCo's xpos); equal to
    MuJoCo's `cfrc_int` moved to that point.
    """
    lagrangian = model.system.lagrangian
    if not isinstance(lagrangian, TreeLagrangian):
        raise ValueError(
            f"joint_reactions: {model.name} is not a tree model; read it with "
            "lb.from_mjcf or lb.from_urdf (joint coordinates), or take the joint "
            "forces of an absolute model from its multipliers (lb.joint_forces)."
        )
    loops = [c for c in model.constraint_names if not c.startswith("|e|=1")]
    if loops:
        raise ValueError(
            f"joint_reactions: {model.name} closes loops ({loops[0]!r}, ...), "
            "whose forces (the multipliers) also load the tree joints; reactions "
            "of trees without loop closures only."
        )
    params = model.params if params is None else params
    force, torque = lagrangian.joint_reactions(t, q, qd, qdd, params)
    return lagrangian.body_names, force, torque
