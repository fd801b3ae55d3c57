"""A batch of point-mass double pendulums, fixed steps: system-steps per second.

B = 1000 Cartesian double pendulums (two point masses on rods, n = 4, m = 2)
with different initial angles, 1000 classical RK4 steps of dt = 1e-3 each, side
by side in one process:

- vectorized NumPy RK4, the KKT systems solved batched by np.linalg.solve;
- jax + diffrax by hand: `vmap` of a diffrax solve whose vector field solves the
  KKT matrix with jnp.linalg.solve;
- lagrax: `vmap` of `lx.simulate` (no stabilization, so that every method does
  the same work per step; SchurCholesky saddle solve).

Prints system-steps/s (B * steps / warm wall time) and the ratio to NumPy.

    python benchmarks/batch.py [--batch 1000] [--steps 1000] [--repeats 3]
"""

import argparse

import jax


jax.config.update("jax_enable_x64", True)

import _peers  # noqa: E402
import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

import lagrax as lx  # noqa: E402


PARAMS = {"m": 1.0, "g": 9.81, "l": 1.0}


def lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * (q[1] + q[3])


def constraints(t, q, p):
    r1, r2 = q[:2], q[2:]
    d = r2 - r1
    return jnp.stack([r1 @ r1 - p["l"] ** 2, d @ d - p["l"] ** 2])


SYSTEM = lx.System(lagrangian, constraints)


def initial_states(batch):
    angles = np.linspace(0.2, 2.5, batch)
    l = PARAMS["l"]
    r1 = np.stack([l * np.sin(angles), -l * np.cos(angles)], axis=1)
    r2 = r1 + np.stack([l * np.sin(2 * angles), -l * np.cos(2 * angles)], axis=1)
    return np.concatenate([r1, r2], axis=1), np.zeros((batch, 4))


def numpy_rk4(q0, v0, dt, steps):
    p = PARAMS

    def accel(q, v):
        B = q.shape[0]
        r1, r2 = q[:, :2], q[:, 2:]
        v1, v2 = v[:, :2], v[:, 2:]
        d, dv = r2 - r1, v2 - v1
        A = np.zeros((B, 6, 6))
        A[:, :4, :4] = p["m"] * np.eye(4)
        J = np.zeros((B, 2, 4))
        J[:, 0, :2] = 2 * r1
        J[:, 1, :2], J[:, 1, 2:] = -2 * d, 2 * d
        A[:, :4, 4:] = -np.transpose(J, (0, 2, 1))
        A[:, 4:, :4] = J
        rhs = np.zeros((B, 6))
        rhs[:, 1] = rhs[:, 3] = -p["m"] * p["g"]
        rhs[:, 4] = -2 * np.sum(v1 * v1, axis=1)
        rhs[:, 5] = -2 * np.sum(dv * dv, axis=1)
        return np.linalg.solve(A, rhs[..., None])[:, :4, 0]

    q, v = q0.copy(), v0.copy()
    for _ in range(steps):
        k1q, k1v = v, accel(q, v)
        k2q, k2v = v + 0.5 * dt * k1v, accel(q + 0.5 * dt * k1q, v + 0.5 * dt * k1v)
        k3q, k3v = v + 0.5 * dt * k2v, accel(q + 0.5 * dt * k2q, v + 0.5 * dt * k2v)
        k4q, k4v = v + dt * k3v, accel(q + dt * k3q, v + dt * k3v)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return q


def jax_by_hand(dt, steps):
    def field(t, y, p):
        q, v = y
        qdd, _ = _peers.kkt(jnp, *_peers.chain2_terms(jnp, t, q, v, p))
        return v, qdd

    def one(q0, v0, p):
        sol = dfx.diffeqsolve(dfx.ODETerm(field), lx.RK4(), 0.0, dt * steps, dt,
                              (q0, v0), args=p, max_steps=steps + 1)  # fmt: skip
        return sol.ys[0][-1]

    return jax.jit(jax.vmap(one, (0, 0, None)))


def lagrax_batch(dt, steps):
    def one(q0, v0, p):
        sol = lx.simulate(SYSTEM, q0, v0, p, t1=dt * steps, solver=lx.RK4(),
                          stepsize_controller=dfx.ConstantStepSize(), dt0=dt,
                          stabilization=lx.NoStabilization(),
                          max_steps=steps + 1)  # fmt: skip
        return sol.q[-1]

    return jax.jit(jax.vmap(one, (0, 0, None)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dt = 1e-3
    q0, v0 = initial_states(args.batch)
    pj = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    work = args.batch * args.steps
    _, t_np, q_np = timed(lambda: numpy_rk4(q0, v0, dt, args.steps), 1)
    hand = jax_by_hand(dt, args.steps)
    _, t_hand, q_hand = timed(lambda: hand(jnp.asarray(q0), jnp.asarray(v0), pj),
                             args.repeats)  # fmt: skip
    ours = lagrax_batch(dt, args.steps)
    _, t_ours, q_ours = timed(lambda: ours(jnp.asarray(q0), jnp.asarray(v0), pj),
                             args.repeats)  # fmt: skip
    # All three integrate the same equations with the same steps.
    assert np.max(np.abs(np.asarray(q_hand) - q_np)) < 1e-9
    assert np.max(np.abs(np.asarray(q_ours) - q_np)) < 1e-9
    print(f"batch {args.batch} x {args.steps} RK4 steps, {jax.device_count()} "
          f"{jax.default_backend()} device(s)")  # fmt: skip
    for name, t in (("NumPy vectorized", t_np), ("jax + diffrax by hand", t_hand),
                    ("lagrax", t_ours)):  # fmt: skip
        print(f"  {name:24s} {t:8.3f} s  {work / t / 1e6:7.2f} M system-steps/s  "
              f"{t_np / t:6.1f}x NumPy")  # fmt: skip


if __name__ == "__main__":
    main()
