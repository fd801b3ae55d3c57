"""Projection onto the constraint manifold (the step of `lagrax.Projection`)."""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from ._custom_types import Params
from ._mechanics import (
    constraint_jacobian,
    mass_matrix,
    num_constraints,
    num_velocity_constraints,
    velocity_jacobian,
    velocity_rows,
)
from ._saddle import AbstractSaddleSolver
from ._system import System


class AbstractClosedFormProjection(eqx.Module):
    """Constraints `phi(t, q, params)` whose mass-weighted projection, for the
    System they belong to, has a closed form, which `ManifoldProjector` then
    takes instead of its Newton iterations.

    A tree model's unit quaternions are one: M e is parallel to e there (the
    quaternion's radial direction moves nothing and carries its own radial
    term), so the M-orthogonal projection onto |e| = 1 is e / |e|, and onto
    e . e_dot = 0 the removal of e_dot's radial part.
    """

    @abc.abstractmethod
    def __call__(self, t, q, params: Params):
        """phi(t, q, params), (m,)."""

    @abc.abstractmethod
    def project(self, t, q, qd, params: Params):
        """The projected (q, qd), or None where there is no closed form (decided
        at trace time)."""

    def decoupled_rows(self) -> tuple[int, ...]:
        """Rows whose gradients are eigenvectors of the System's mass matrix at
        every state and orthogonal to the other rows' gradients (and to each
        other). The saddle solve leaves them out and adds their part in closed
        form: with J_r those rows, the accelerations gain J_r^T kappa, the
        multipliers (J_r J_r^T)^-1 J_r (M qdd - f - J^T lam) (tests check it
        against the whole solve). Static; default none.

        A tree model's unit quaternions are such rows: M e is parallel to e
        (`TreeLagrangian`'s radial term), and the poses, hence the loop rows,
        do not depend on |e|.
        """
        return ()


class ManifoldProjector(eqx.Module):
    """Mass-weighted projection of (q, qd) onto phi = 0 and J qd + phi_t = 0.

    Positions: Gauss-Newton on min (q' - q)^T M (q' - q) subject to phi(t, q') = 0,
    each correction the saddle solve of [[M, -J^T], [J, 0]] [dq, mu] = [0, -phi].
    Velocities: the same metric and saddle solve with residual J qd + phi_t, exact
    in one step for a given J; repeated with each new J. Velocity constraints
    A qd + b = 0 join the velocity step (the matrix [J; A]); positions know only
    phi.

    Derivatives are those of the exact projection, by the implicit function
    theorem at the projected point (dq* = P dq with P the M-orthogonal projector
    onto the tangent space of the constraints, plus the parameters' and time's
    part), not by differentiating the iterations. This drops terms of the order of
    the drift removed (the step's tolerance) and makes a gradient through a
    projected simulation little dearer than one without.
    """

    system: System
    saddle_solver: AbstractSaddleSolver
    iterations: int = eqx.field(static=True, default=3)

    def __call__(self, t, q, qd, params: Params):
        m = num_constraints(self.system, t, q, params)
        if m + num_velocity_constraints(self.system, t, q, params) == 0:
            return q, qd
        constraints = self.system.constraints
        if (
            isinstance(constraints, AbstractClosedFormProjection)
            and self.system.velocity_constraints is None
        ):
            projected = constraints.project(t, q, qd, params)
            if projected is not None:
                return projected
        # The time as an array: a Python float would be a static argument of
        # the jitted projection below.
        t = jnp.asarray(t, q.dtype)
        return _traced_once(
            self.system, self.saddle_solver, t, q, qd, params, self.iterations
        )


@eqx.filter_jit
def _traced_once(system, saddle_solver, t, q, qd, params, iterations):
    # A simulation projects each step and each saved state, and a gradient
    # differentiates each: behind jit, JAX traces the projection (and its
    # derivative) once per system and shapes for all of them (as
    # `solve_dynamics`); XLA inlines the calls.
    return _project(system, saddle_solver, t, q, qd, params, iterations=iterations)


@eqx.filter_jit
def _newton(system, saddle_solver, t, q, qd, params, iterations):
    mass = mass_matrix(system, t, q, qd, params)
    saddle_solver = saddle_solver.specialize(system, t, q, qd, params)
    zero = jnp.zeros_like(q)

    def correction(jac, residual):
        return saddle_solver.solve(mass, jac, zero, -residual).qdd

    def newton(_, state):
        q_, qd_ = state
        phi, jac, phi_t = constraint_jacobian(system, t, q_, params)
        if system.velocity_constraints is None:
            # One batched solve for both corrections (the same matrix).
            residuals = jnp.stack([phi, jac @ qd_ + phi_t])
            dq, dqd = jax.vmap(lambda r: correction(jac, r))(residuals)
            return q_ + dq, qd_ + dqd
        dq = correction(jac, phi) if phi.shape[0] else zero
        a, b = velocity_rows(system, t, q_, params)
        g, r = jnp.concatenate([jac, a]), jnp.concatenate([phi_t, b])
        return q_ + dq, qd_ + correction(g, g @ qd_ + r)

    # Each iteration corrects both; once q has converged (the last iteration's dq
    # is at round-off level) the velocity correction used the final J.
    return jax.lax.fori_loop(0, iterations, newton, (q, qd))


@eqx.filter_custom_jvp
def _project(system, saddle_solver, t, q, qd, params, *, iterations):
    return _newton(system, saddle_solver, t, q, qd, params, iterations)


@_project.def_jvp
def _project_jvp(primals, tangents, *, iterations):
    system, saddle_solver, t, q, qd, params = primals
    _, _, t_t, t_q, t_qd, t_params = tangents
    q_star, qd_star = _newton(system, saddle_solver, t, q, qd, params, iterations)
    mass = mass_matrix(system, t, q_star, qd_star, params)
    saddle_solver = saddle_solver.specialize(system, t, q_star, qd_star, params)
    _, jac, _ = constraint_jacobian(system, t, q_star, params)

    def correction(jac_, residual):  # -M^-1 J^T (J M^-1 J^T)^-1 residual
        return saddle_solver.solve(mass, jac_, jnp.zeros_like(q), -residual).qdd

    # q* = q + correction(phi(t, q*)) to first order: dq* = dq + correction(J dq
    # + phi_t dt + phi_params dparams), the last two with q* held.
    d_q = _zeros_if_none(t_q, q)
    if jac.shape[0]:
        _, d_phi = _jvp(
            lambda t_, p_: constraint_jacobian(system, t_, q_star, p_)[0],
            (t, params),
            (t_t, t_params),
        )
        d_q_star = d_q + correction(jac, jac @ d_q + d_phi)
    else:
        d_q_star = d_q

    # qd* = qd - G r(q*, qd), r = J(q*) qd + phi_t(q*) (and A qd + b): dqd* =
    # dqd + correction(dr).
    def velocity_residual(q_, qd_, t_, p_):
        g_, r_ = velocity_jacobian(system, t_, q_, p_)
        return g_ @ qd_ + r_

    # [J; A] at q*, with the J already formed above.
    g = jnp.concatenate([jac, velocity_rows(system, t, q_star, params)[0]])
    _, d_residual = _jvp(
        velocity_residual, (q_star, qd, t, params), (d_q_star, t_qd, t_t, t_params)
    )
    d_qd_star = _zeros_if_none(t_qd, qd) + correction(g, d_residual)
    return (q_star, qd_star), (d_q_star, d_qd_star)


def _zeros_if_none(tangent, primal):
    return jnp.zeros_like(primal) if tangent is None else tangent


def _jvp(fn, primals, tangents):
    """eqx.filter_jvp with an output tangent of zeros where no input reaches."""
    out, tangent = eqx.filter_jvp(fn, primals, tangents)
    return out, jax.tree.map(
        lambda t_, o: jnp.zeros_like(o) if t_ is None else t_,
        tangent,
        out,
        is_leaf=lambda x: x is None,
    )
