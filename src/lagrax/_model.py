"""`Model`: a ready-to-run system with its parameters, initial state and drawing."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._initial import consistent_state
from ._structure import _used_inputs as used_inputs
from ._system import System


def _uses_time(fn, dtype) -> bool:
    """Whether fn(t)'s value is computed from t, read from its jaxpr."""
    try:
        closed = jax.make_jaxpr(fn)(jnp.zeros((), dtype))
    except Exception:  # noqa: BLE001 -- undecidable counts as time-dependent
        return True
    return used_inputs(closed.jaxpr)[0]


class Model(eqx.Module):
    """A built-in mechanical system, ready to simulate and to draw.

    **Fields:**

    - `name`: short name (`lagrax.systems.get(name)` finds it).
    - `description`: one line.
    - `system`: the [`lagrax.System`][].
    - `params`: default parameters (a dict of floats; override by copying).
    - `coordinates`, `units`: names and units of the n coordinates.
    - `constraint_names`: names of the m constraints (and their multipliers).
    - `multiplier_units`: the units of the m multipliers (a pin's force in N, a
        length constraint x^2 + y^2 - l^2 = 0 in N/m since J = 2 q^T, ...); empty
        where unknown.
    - `q_guess`, `qd_guess`, `fixed_q`, `fixed_qd`: the rough initial state and
        the coordinates to keep while [`lagrax.consistent_state`][] solves the
        rest; `initial_state()` does that.
    - `points`: `points(t, q, params) -> (k, 2)`, points of the mechanism in the
        plane, and `segments`, pairs of point indices to draw as links;
        `springs`, pairs of point indices to draw as coil springs.
    - `constraint_forces`: `constraint_forces(t, q, lam, params) -> (points,
        forces)`, both (k, 2): where constraint forces act in the plane (joints)
        and the force vectors there, from the multipliers lam; drawn in the
        animations of the `lagrax` command.
    - `conservative`: whether the energy E = qd . dL/dqd - L is conserved: a
        bool, or `conservative(params) -> bool` where it depends on the
        parameters (a damper c = 0 does no work). `None` (the default): derived
        by `is_conservative`. Where it is not, E(t) - E(0) is the work of the
        forces and drives.
    - `joint_space`, `joint_limits`: for a model read from a file
        ([`lagrax.bodies.from_mjcf`][]): its joint space (see
        `from_joint_space`, `to_joint_space`) and its joints' ranges, (name,
        (low, high)) pairs, kept as data and not enforced.
    - `reference`: a published reference solution, where one exists: a dict with
        the time `t` and the values of `q`, `qd`, ... there, in lagrax's sign
        convention.
    """

    name: str = eqx.field(static=True)
    description: str = eqx.field(static=True)
    system: System
    params: dict[str, Any]
    coordinates: tuple[str, ...] = eqx.field(static=True)
    units: tuple[str, ...] = eqx.field(static=True)
    constraint_names: tuple[str, ...] = eqx.field(static=True)
    q_guess: tuple[float, ...] = eqx.field(static=True)
    qd_guess: tuple[float, ...] = eqx.field(static=True)
    fixed_q: tuple[int, ...] = eqx.field(static=True, default=())
    fixed_qd: tuple[int, ...] = eqx.field(static=True, default=())
    points: Callable[[Array, Array, Params], Array] | None = None
    segments: tuple[tuple[int, int], ...] = eqx.field(static=True, default=())
    constraint_forces: Callable[..., tuple[Array, Array]] | None = None
    reference: dict[str, Any] | None = eqx.field(static=True, default=None)
    multiplier_units: tuple[str, ...] = eqx.field(static=True, default=())
    springs: tuple[tuple[int, int], ...] = eqx.field(static=True, default=())
    conservative: bool | Callable[[Params], Any] | None = eqx.field(
        static=True, default=None
    )
    joint_space: Any = None
    joint_limits: tuple[tuple[str, tuple[float, float]], ...] = eqx.field(
        static=True, default=()
    )

    def from_joint_space(self, qpos, qvel) -> tuple[Array, Array]:
        """lagrax's (q, qd) at a model file's joint positions and velocities
        (MuJoCo's qpos, qvel): forward kinematics, consistent by construction.
        Only for models read by [`lagrax.bodies.from_mjcf`][]."""
        # Imported here: bodies/_mjcf.py imports this module at its top.
        from .bodies._joint_space import joint_space_of

        return joint_space_of(self).from_joint_space(qpos, qvel)

    def to_joint_space(self, q, qd) -> tuple[Array, Array]:
        """The model file's joint positions and velocities (MuJoCo's qpos,
        qvel) at lagrax's (q, qd): the bodies' relative motion at each joint.
        Differentiable; only for models read by [`lagrax.bodies.from_mjcf`][]."""
        # Imported here: bodies/_mjcf.py imports this module at its top.
        from .bodies._joint_space import joint_space_of

        return joint_space_of(self).to_joint_space(q, qd)

    def is_conservative(self, params: Params | None = None) -> bool:
        """Whether the energy is conserved under `params` (default: the model's).

        From `conservative` where the model states it; otherwise derived from
        the System: conserved when it has no `forces` and neither its Lagrangian
        nor its constraints depend on t explicitly (read from their jaxprs, so
        exact; anything that cannot be traced counts as not conserved). Ideal
        constraints that do not depend on t do no work, velocity constraints
        included where they are homogeneous in qd (a knife edge; checked at
        `q_guess`).
        """
        if params is None:
            params = self.params
        if isinstance(self.conservative, bool):
            return self.conservative
        if self.conservative is not None:
            return bool(self.conservative(params))
        system = self.system
        if system.forces is not None:
            return False
        q = jnp.asarray(self.q_guess, dtype=float)
        qd = jnp.asarray(self.qd_guess, dtype=float)
        calls = [lambda t: system.lagrangian(t, q, qd, params)]
        if system.constraints is not None:
            calls.append(lambda t: system.constraints(t, q, params))
        if system.velocity_constraints is not None:
            calls.append(lambda t: system.velocity_constraints(t, q, qd, params))
            # psi = A qd + b does the work -mu . b: workless only where b = 0.
            rest = system.velocity_constraints(0.0, q, jnp.zeros_like(qd), params)
            if bool(jnp.any(rest != 0)):
                return False
        return not any(_uses_time(call, q.dtype) for call in calls)

    def initial_state(
        self,
        params: Params | None = None,
        t: float = 0.0,
        *,
        q=None,
        qd=None,
        fixed_q=None,
        fixed_qd=None,
    ) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
        """The consistent default initial state (q0, qd0) for `params`.

        Solves the constraints from the rough guess, keeping the fixed
        coordinates, so it stays consistent when the parameters change (e.g. a
        longer pendulum). `q`, `qd`, `fixed_q`, `fixed_qd` replace the model's
        guess and fixed coordinates where given.
        """
        if params is None:
            params = self.params
        q = self.q_guess if q is None else q
        qd = self.qd_guess if qd is None else qd
        fixed_q = self.fixed_q if fixed_q is None else fixed_q
        fixed_qd = self.fixed_qd if fixed_qd is None else fixed_qd
        return consistent_state(
            self.system,
            jnp.asarray(q, dtype=float),
            jnp.asarray(qd, dtype=float),
            params,
            t,
            fixed_q=list(fixed_q) or None,
            fixed_qd=list(fixed_qd) or None,
        )
