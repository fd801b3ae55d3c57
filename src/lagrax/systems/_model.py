"""`Model`: a ready-to-run system with its parameters, initial state and drawing."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._custom_types import Params
from .._initial import consistent_state
from .._system import System


class Model(eqx.Module):
    """A built-in mechanical system, ready to simulate and to draw.

    **Fields:**

    - `name`: short name (`lagrax.systems.get(name)` finds it).
    - `description`: one line.
    - `system`: the [`lagrax.System`][].
    - `params`: default parameters (a dict of floats; override by copying).
    - `coordinates`, `units`: names and units of the n coordinates.
    - `constraint_names`: names of the m constraints (and their multipliers).
    - `q_guess`, `qd_guess`, `fixed_q`, `fixed_qd`: the rough initial state and
        the coordinates to keep while [`lagrax.consistent_state`][] solves the
        rest; `initial_state()` does that.
    - `points`: `points(t, q, params) -> (k, 2)`, points of the mechanism in the
        plane, and `segments`, pairs of point indices to draw as links.
    - `constraint_forces`: `constraint_forces(t, q, lam, params) -> (points,
        forces)`, both (k, 2): where constraint forces act in the plane (joints)
        and the force vectors there, from the multipliers lam; drawn in the
        animations of the `lagrax` command.
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
