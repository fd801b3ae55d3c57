"""Every term of the equations of motion, derived from the user's functions.

This is the only module that differentiates the user's functions. With
p(t, q, qd) = dL/dqd, the Euler-Lagrange equations read

    M qdd = dL/dq - (dp/dq) qd - dp/dt + Q + J^T lam = f + J^T lam,

so M (columns dp/dqd_i) and the bias (dp/dq) qd + dp/dt are all tangents of the
one function (t, q, qd) -> (dL/dq, p): a single batched jvp of the gradient gives
them together, never a dense third-order tensor. The constraint terms follow from
nested jvps of phi along the path direction (1, qd):

    phi_dot = J qd + phi_t,
    gamma   = d2/dt2 phi(t, q(t)) at qdd = 0 = (J qd)_q qd + 2 phi_tq qd + phi_tt,

so explicitly time-dependent (rheonomic) constraints need no extra code.

Velocity (nonholonomic, Pfaffian) constraints psi(t, q, qd) = A qd + b = 0 add
rows A = dpsi/dqd to the constraint matrix and, at the acceleration level,
A qdd + gamma_v = 0 with gamma_v = psi_t + psi_q qd (one jvp along (1, qd) with
qd held). Every constraint array below is stacked, holonomic rows first; a
velocity constraint has no position residual, and its rows of `phi` are zero.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._system import System, function_name


class Mechanics(eqx.Module):
    """The terms of the acceleration-level saddle-point problem at one state.

    `M qdd - J^T lam = force` and `J qdd = -gamma + (stabilization)`. With
    velocity constraints, `jac`, `phi_dot` and `gamma` have k more rows (A,
    A qd + b and gamma_v) and `phi` k more zeros.
    """

    mass: Float[Array, "n n"]
    force: Float[Array, " n"]
    jac: Float[Array, "m n"]
    phi: Float[Array, " m"]
    phi_dot: Float[Array, " m"]
    gamma: Float[Array, " m"]


class AbstractLagrangian(eqx.Module):
    """A Lagrangian that supplies its own mass matrix and forces.

    Called as `lagrangian(t, q, qd, params)` like any Lagrangian (energy, the
    reference of tests), but `mechanics` takes M and f = dL/dq - (dp/dq) qd -
    dp/dt from `terms`, where the Lagrangian's structure makes them cheaper
    than autodiff of the whole function (a kinematic tree: one pass over the
    bodies instead of one per coordinate).
    """

    @abc.abstractmethod
    def __call__(self, t, q, qd, params: Params) -> Array:
        """L(t, q, qd, params), a scalar."""

    @abc.abstractmethod
    def terms(self, t, q, qd, params: Params) -> tuple[Array, Array]:
        """(M, f) at (t, q, qd): M = d2L/dqd2 and f = dL/dq - (dp/dq) qd - dp/dt
        with p = dL/dqd, exactly as autodiff of `__call__` would give them."""

    def mass(self, t, q, qd, params: Params) -> Array:
        """M alone (a projection needs no f): `terms`' M unless overridden."""
        return self.terms(t, q, qd, params)[0]


def lagrangian_terms(lagrangian, t, q, qd, params: Params) -> tuple[Array, Array]:
    """(M, f) of any Lagrangian: from `terms` for an `AbstractLagrangian`,
    otherwise by autodiff. f leaves out the non-conservative forces."""
    t = _as_time(t, q)
    if isinstance(lagrangian, AbstractLagrangian):
        return lagrangian.terms(t, q, qd, params)

    def value(t_, q_, qd_):
        return _scalar(lagrangian, t_, q_, qd_, params)

    # p = dL/dqd; d/dt p = M qdd + (dp/dq) qd + dp/dt along the motion. M by
    # forward mode over p, the rest by one tangent (1, qd): fewer and larger fused
    # kernels than one batch of n + 1 tangents through the whole gradient (2.4x
    # faster on Andrews' squeezer).
    momentum = jax.grad(value, argnums=2)
    mass = _mass(momentum, t, q, qd)
    _, mixed = jax.jvp(
        lambda t_, q_: momentum(t_, q_, qd), (t, q), (jnp.ones_like(t), qd)
    )
    return mass, jax.grad(value, argnums=1)(t, q, qd) - mixed


def lagrangian_value(system: System, t, q, qd, params: Params) -> Array:
    """L(t, q, qd, params), checked to be a scalar."""
    return _scalar(system.lagrangian, t, q, qd, params)


def _scalar(lagrangian, t, q, qd, params: Params) -> Array:
    value = jnp.asarray(lagrangian(t, q, qd, params))
    if value.shape != ():
        raise ValueError(
            f"System.lagrangian ({function_name(lagrangian)}) must return a "
            f"scalar, but returned shape {value.shape} for q of shape {q.shape}. "
            "Sum the energies into one number, e.g. `return T - V` with "
            "`T = 0.5 * qd @ M @ qd`."
        )
    return value


def constraint_value(system: System, t, q, params: Params) -> Float[Array, " m"]:
    """phi(t, q, params), checked to be 1-D (empty for an unconstrained system)."""
    if system.constraints is None:
        return jnp.zeros((0,), q.dtype)
    value = jnp.asarray(system.constraints(t, q, params))
    if value.ndim != 1:
        raise ValueError(
            f"System.constraints ({function_name(system.constraints)}) must return a "
            f"1-D array of shape (m,), but returned shape {value.shape}. "
            "Return `jnp.stack([phi1, phi2, ...])`, or `jnp.atleast_1d(phi)` for a "
            "single constraint."
        )
    return value


def force_value(system: System, t, q, qd, params: Params) -> Float[Array, " n"]:
    """The generalized non-conservative forces Q(t, q, qd, params), shape (n,)."""
    if system.forces is None:
        return jnp.zeros_like(q)
    value = jnp.asarray(system.forces(t, q, qd, params))
    if value.shape != q.shape:
        raise ValueError(
            f"System.forces ({function_name(system.forces)}) must return an array of "
            f"the shape of q, {q.shape}, but returned shape {value.shape}. Give one "
            "generalized force per coordinate (zeros where none acts)."
        )
    return value


def velocity_constraint_value(
    system: System, t, q, qd, params: Params
) -> Float[Array, " k"]:
    """psi(t, q, qd, params), checked to be 1-D (empty if there are none)."""
    if system.velocity_constraints is None:
        return jnp.zeros((0,), q.dtype)
    value = jnp.asarray(system.velocity_constraints(t, q, qd, params))
    if value.ndim != 1:
        name = function_name(system.velocity_constraints)
        raise ValueError(
            f"System.velocity_constraints ({name}) must return a 1-D array of shape "
            f"(k,), but returned shape {value.shape}. Return `jnp.stack([psi1, "
            "psi2, ...])`, or `jnp.atleast_1d(psi)` for a single constraint."
        )
    return value


def num_constraints(system: System, t, q, params: Params) -> int:
    """m, the number of holonomic constraints, from shapes alone (no computation)."""
    return jax.eval_shape(lambda q_: constraint_value(system, t, q_, params), q).shape[
        0
    ]


def num_velocity_constraints(system: System, t, q, params: Params) -> int:
    """k, the number of velocity constraints, from shapes alone."""
    if system.velocity_constraints is None:
        return 0
    return jax.eval_shape(
        lambda q_: velocity_constraint_value(system, t, q_, q_, params), q
    ).shape[0]


def _as_time(t, q: Array) -> Array:
    return jnp.asarray(t, dtype=q.dtype)


def mechanics(system: System, t, q, qd, params: Params) -> Mechanics:
    """Evaluate M, f, J, phi, phi_dot and gamma at (t, q, qd) by autodiff (M and
    f from `terms` for an `AbstractLagrangian`)."""
    t = _as_time(t, q)
    mass, force = lagrangian_terms(system.lagrangian, t, q, qd, params)
    force = force + force_value(system, t, q, qd, params)

    phi, phi_dot, gamma, jac = constraint_terms(system, t, q, qd, params)
    return Mechanics(mass, force, jac, phi, phi_dot, gamma)


def constraint_terms(system: System, t, q, qd, params: Params):
    """(phi, phi_dot, gamma, J) at (t, q, qd), by nested jvp along (1, qd).

    Velocity constraints, if any, are stacked below: phi 0, phi_dot psi, gamma
    gamma_v and J A.
    """
    t = _as_time(t, q)
    one = jnp.ones((), q.dtype)

    def phi_fn(t_, q_):
        return constraint_value(system, t_, q_, params)

    def phi_and_rate(t_, q_):
        return jax.jvp(phi_fn, (t_, q_), (one, qd))

    (phi, phi_dot), (_, gamma) = jax.jvp(phi_and_rate, (t, q), (one, qd))
    jac = jax.jacfwd(phi_fn, argnums=1)(t, q)
    if system.velocity_constraints is None:
        return phi, phi_dot, gamma, jac

    def psi_fn(t_, q_, qd_):
        return velocity_constraint_value(system, t_, q_, qd_, params)

    # psi is affine in qd: A = dpsi/dqd exactly; d/dt psi = A qdd + gamma_v.
    psi, gamma_v = jax.jvp(lambda t_, q_: psi_fn(t_, q_, qd), (t, q), (one, qd))
    a = jax.jacfwd(psi_fn, argnums=2)(t, q, qd)
    return (
        jnp.concatenate([phi, jnp.zeros_like(psi)]),
        jnp.concatenate([phi_dot, psi]),
        jnp.concatenate([gamma, gamma_v]),
        jnp.concatenate([jac, a]),
    )


def constraint_jacobian(system: System, t, q, params: Params):
    """(phi, J, phi_t) at (t, q): what a position/velocity projection needs."""
    t = _as_time(t, q)

    def phi_fn(t_, q_):
        return constraint_value(system, t_, q_, params)

    phi, phi_t = jax.jvp(phi_fn, (t, q), (jnp.ones((), q.dtype), jnp.zeros_like(q)))
    jac = jax.jacfwd(phi_fn, argnums=1)(t, q)
    return phi, jac, phi_t


def velocity_rows(system: System, t, q, params: Params):
    """(A, b) at (t, q): the velocity constraints are A qd + b = 0 (k rows)."""
    if system.velocity_constraints is None:
        return jnp.zeros((0, q.shape[0]), q.dtype), jnp.zeros((0,), q.dtype)
    t = _as_time(t, q)
    zero = jnp.zeros_like(q)

    def psi_fn(qd_):
        return velocity_constraint_value(system, t, q, qd_, params)

    return jax.jacfwd(psi_fn)(zero), psi_fn(zero)


def velocity_jacobian(system: System, t, q, params: Params):
    """(G, r) at (t, q): every constraint at the velocity level is G qd + r = 0.

    G stacks J and A, r stacks phi_t and b (holonomic rows first).
    """
    _, jac, phi_t = constraint_jacobian(system, t, q, params)
    if system.velocity_constraints is None:
        return jac, phi_t
    a, b = velocity_rows(system, t, q, params)
    return jnp.concatenate([jac, a]), jnp.concatenate([phi_t, b])


def mass_matrix(system: System, t, q, qd, params: Params) -> Float[Array, "n n"]:
    """M = d2L/dqd2 at (t, q, qd)."""
    t = _as_time(t, q)
    if isinstance(system.lagrangian, AbstractLagrangian):
        return system.lagrangian.mass(t, q, qd, params)

    def lagrangian(t_, q_, qd_):
        return lagrangian_value(system, t_, q_, qd_, params)

    return _mass(jax.grad(lagrangian, argnums=2), t, q, qd)


def _mass(momentum, t, q, qd):
    # The one definition of M, shared with the structure test (_structure.py).
    return jax.jacfwd(momentum, argnums=2)(t, q, qd)


def energy(system: System, t, q, qd, params: Params) -> Array:
    """The Jacobi integral E = qd . dL/dqd - L (T + V for natural systems)."""
    t = _as_time(t, q)
    value, p = jax.value_and_grad(lambda b: lagrangian_value(system, t, q, b, params))(
        qd
    )
    return qd @ p - value
