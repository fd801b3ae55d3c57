"""The result of a simulation: states and everything derived at the saved times."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import Params
from ._dynamics import solve_dynamics
from ._mechanics import energy
from ._results import RESULTS, is_failure, result_names
from ._saddle import AbstractSaddleSolver
from ._stabilization import AbstractStabilization
from ._system import System


class Trajectory(eqx.Module):
    """A simulated trajectory, every field evaluated at the saved times `ts`.

    **Fields:**

    - `ts`: (T,) the saved times.
    - `q`, `qd`, `qdd`: (T, n) coordinates, velocities, accelerations.
    - `multipliers`: (T, m) Lagrange multipliers lam; the generalized constraint
        forces are J^T lam (sign convention M qdd = f + J^T lam). With k velocity
        constraints, (T, m + k): their multipliers mu follow, forces A^T mu.
    - `phi`, `phi_dot`: (T, m) constraint residuals phi(t, q) and J qd + phi_t;
        with velocity constraints (T, m + k), their residuals A qd + b in the last
        k columns of `phi_dot` (and zeros in those of `phi`).
    - `energy`: (T,) the Jacobi integral qd . dL/dqd - L (T + V for natural
        systems); constant for conservative time-independent systems.
    - `stats`: diffrax's statistics (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`, `max_steps`).
    - `result`: a [`lagrax.RESULTS`][]; `RESULTS.successful` unless the solve
        failed (only seen with `throw=False`). Entries after a failure are inf/nan.
        `lx.RESULTS[sol.result]` is its message, with the fix.

    A batch (from `jax.vmap` or [`lagrax.simulate_batch`][]) has a leading batch
    axis on every field; `sol[i]` is member i as a Trajectory of its own,
    `sol.status` the result names per member and `sol.failed` which failed:

        bad = np.flatnonzero(sols.failed)
        print(bad, sols.status[bad], lx.RESULTS[sols[bad[0]].result])
    """

    ts: Float[Array, " T"]
    q: Float[Array, "T n"]
    qd: Float[Array, "T n"]
    qdd: Float[Array, "T n"]
    multipliers: Float[Array, "T m"]
    phi: Float[Array, "T m"]
    phi_dot: Float[Array, "T m"]
    energy: Float[Array, " T"]
    stats: dict[str, Any]
    result: RESULTS

    @property
    def status(self) -> np.ndarray:
        """The name of `result` ('successful', 'max_steps', 'nonfinite_inputs',
        ...): a NumPy string array of the batch shape (0-d for one trajectory)."""
        return result_names(self.result)

    @property
    def failed(self) -> np.ndarray:
        """Whether the solve failed (anything but successful or an event), as a
        NumPy bool array of the batch shape."""
        return np.asarray(is_failure(self.result))

    def __getitem__(self, index) -> "Trajectory":
        """Member(s) `index` of a batch of trajectories: `sols[3]`, `sols[bad]`."""
        if self.q.ndim < 3:
            raise TypeError(
                "Trajectory: indexing selects members of a batch (from vmap or "
                "simulate_batch); this is one trajectory. Index its fields instead: "
                "sol.q[i] is the state at the i-th saved time."
            )
        return jax.tree.map(lambda x: x[index], self)


def evaluate_trajectory(
    system: System,
    stabilization: AbstractStabilization,
    saddle_solver: AbstractSaddleSolver,
    ts,
    q,
    qd,
    params: Params,
    stats: dict[str, Any],
    result: RESULTS,
    probes,
):
    """Project the saved states (if the stabilization projects) and derive the rest.

    `probes` = (ts, q, qd): further states at which only the saddle solve's
    result is wanted, neither projected nor differentiated. They go
    through the same vectorized evaluation as the saved states, so that the
    compiled program holds one copy of the dynamics, not two (probes evaluated
    apart cost a quarter of the compile time of a small simulation). Returns the
    Trajectory and the probes' results. The probes must lie where
    the model is finite unless the solve failed: their rows share the
    parameters, and a zero cotangent times a NaN derivative in a probe's row
    would reach the parameters' gradient (see `probe_states`).
    """
    num_saved = ts.shape[0]
    finite = jnp.all(jnp.isfinite(q), axis=1) & jnp.all(jnp.isfinite(qd), axis=1)
    probes = jax.lax.stop_gradient(probes)
    rows = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), (ts, q, qd), probes)
    is_probe = jnp.arange(rows[0].shape[0]) >= num_saved

    def at(t, q_, qd_, probe):
        q_p, qd_p = stabilization.project(system, saddle_solver, t, q_, qd_, params)
        q_, qd_ = jnp.where(probe, q_, q_p), jnp.where(probe, qd_, qd_p)
        terms, sol = solve_dynamics(
            system, stabilization, saddle_solver, t, q_, qd_, params
        )
        e = energy(system, t, q_, qd_, params)
        return q_, qd_, sol.qdd, sol.lam, terms.phi, terms.phi_dot, e, sol.result

    evaluated = jax.vmap(at)(*rows, is_probe)
    saved = jax.tree.map(lambda x: x[:num_saved], evaluated)
    q, qd, qdd, lam, phi, phi_dot, e, saddle_results = saved
    # A saddle failure at a reached state explains a failed solve better than the
    # integrator's own code. States never reached are inf and say nothing.
    failed = (saddle_results != RESULTS.successful) & finite
    first = jax.tree.map(lambda v: v[jnp.argmax(failed)], saddle_results)
    result = RESULTS.where(jnp.any(failed), first, result)
    # Arrays, not Python ints, so that a Trajectory can leave vmap and shard_map.
    stats = {k: jnp.asarray(v) for k, v in stats.items()}
    traj = Trajectory(ts, q, qd, qdd, lam, phi, phi_dot, e, stats, result)
    return traj, jax.tree.map(lambda x: x[num_saved:], evaluated[-1])
