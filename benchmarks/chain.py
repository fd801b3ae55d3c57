"""Scaling: an N-link Cartesian pendulum chain, time per step against N.

N point masses on massless rods of length 1, each written in absolute Cartesian
coordinates (n = 2N coordinates, m = N length constraints), integrated with 200
fixed RK4 steps from a bent start. For N = 2 .. 64, side by side in one process:
lagrax (`lx.simulate`, no stabilization, so the work per step is the vector
field's) with its default SchurCholesky saddle solve (which finds at trace time
that M = m I and factorizes only the N x N Delassus matrix), the same with that
detection off (`detect_structure=False`: Cholesky of the 2N x 2N M), with
DenseLU, and the
same vector field written by hand in jax with `jnp.linalg.solve` of the KKT
matrix. Prints the warm time per step and the exponent p of a fit
time ~ N^p over N >= 8.

    python benchmarks/chain.py [--sizes 2 4 8 16 32 64] [--repeats 3]
"""

import argparse
import functools

import jax


jax.config.update("jax_enable_x64", True)

import _peers  # noqa: E402
import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

import lagrax as lx  # noqa: E402


STEPS, DT = 200, 1e-3
PARAMS = {"m": 1.0, "g": 9.81, "l": 1.0}


def lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * jnp.sum(q[1::2])


def constraints(t, q, p):
    r = q.reshape(-1, 2)
    links = jnp.diff(r, axis=0, prepend=jnp.zeros((1, 2), q.dtype))
    return jnp.sum(links**2, axis=1) - p["l"] ** 2


SYSTEM = lx.System(lagrangian, constraints)


def chain_terms(xp, t, q, v, p):
    """By hand: M = m I, J from the link vectors, gamma = 2 |link velocity|^2."""
    N = q.shape[0] // 2
    r, w = q.reshape(N, 2), v.reshape(N, 2)
    d = jnp.diff(r, axis=0, prepend=jnp.zeros((1, 2), q.dtype))
    dv = jnp.diff(w, axis=0, prepend=jnp.zeros((1, 2), q.dtype))
    rows = jnp.arange(N)
    J = jnp.zeros((N, N, 2), q.dtype).at[rows, rows].set(2 * d)
    J = J.at[rows[1:], rows[:-1]].set(-2 * d[1:]).reshape(N, 2 * N)
    f = jnp.zeros(2 * N, q.dtype).at[1::2].set(-p["m"] * p["g"])
    return p["m"] * jnp.eye(2 * N), f, J, 2 * jnp.sum(dv**2, axis=1)


def start(N):
    angles = 0.3 + 0.4 * np.arange(N) / max(N - 1, 1)
    links = np.stack([np.sin(angles), -np.cos(angles)], axis=1)
    return jnp.asarray(np.cumsum(links, axis=0).ravel()), jnp.zeros(2 * N)


def lagrax_solve(saddle):
    @jax.jit
    def solve(q0, v0, p):
        return lx.simulate(SYSTEM, q0, v0, p, t1=STEPS * DT, solver=lx.RK4(),
                           stepsize_controller=dfx.ConstantStepSize(), dt0=DT,
                           stabilization=lx.NoStabilization(), saddle_solver=saddle,
                           max_steps=STEPS + 1).q[-1]  # fmt: skip

    return solve


@jax.jit
def by_hand(q0, v0, p):
    def field(t, y, p):
        q, v = y
        qdd, _ = _peers.kkt(jnp, *chain_terms(jnp, t, q, v, p))
        return v, qdd

    sol = dfx.diffeqsolve(dfx.ODETerm(field), lx.RK4(), 0.0, STEPS * DT, DT, (q0, v0),
                          args=p, max_steps=STEPS + 1)  # fmt: skip
    return sol.ys[0][-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2, 4, 8, 16, 32, 64])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    p = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    methods = {
        "lagrax SchurCholesky": lagrax_solve(lx.SchurCholesky()),
        "lagrax dense Schur": lagrax_solve(lx.SchurCholesky(detect_structure=False)),
        "lagrax DenseLU": lagrax_solve(lx.DenseLU()),
        "jax by hand, KKT solve": by_hand,
    }
    times = {name: [] for name in methods}
    print(f"{'N':>4s} " + " ".join(f"{name:>24s}" for name in methods))
    for N in args.sizes:
        q0, v0 = start(N)
        finals = []
        for name, solve in methods.items():
            _, warm, q = timed(functools.partial(solve, q0, v0, p), args.repeats)
            times[name].append(warm / STEPS)
            finals.append(np.asarray(q))
        # The same equations and steps: the same answer.
        assert all(np.max(np.abs(f - finals[0])) < 1e-8 for f in finals)
        print(f"{N:4d} " + " ".join(f"{1e6 * times[n][-1]:21.1f} us" for n in methods))
    sizes = np.asarray(args.sizes, dtype=float)
    big = sizes >= 8
    if big.sum() >= 2:
        for name in methods:
            slope = np.polyfit(np.log(sizes[big]), np.log(times[name])[big], 1)[0]
            print(f"{name:24s} time per step ~ N^{slope:.2f} (N >= 8)")


if __name__ == "__main__":
    main()
