"""What building a mechanism from `lagrax.bodies` costs: the same rod chain
written by hand.

`lx.systems.chain(N)`: N uniform rods pinned end to end, absolute coordinates
(x, y, theta) per rod (3N coordinates, 2N pin rows), assembled from N
`PlanarBody`s and N `Revolute` joints, against the same equations written by
hand as one vectorized Lagrangian and one vectorized constraint function. Both
go through `lx.simulate` (200 fixed RK4 steps, no stabilization), side by side in
one process: compile time of the first call and warm time per step.

    python benchmarks/bodies.py [--sizes 2 4 8 16 32] [--repeats 3]
"""

import argparse
import functools
import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

import lagrax as lx  # noqa: E402


STEPS, DT = 200, 1e-3


def lagrangian(t, q, qd, p):
    v = qd.reshape(-1, 3)
    inertia = p["m"] * p["l"] ** 2 / 12
    kinetic = 0.5 * p["m"] * jnp.sum(v[:, :2] ** 2)
    kinetic += 0.5 * inertia * jnp.sum(v[:, 2] ** 2)
    return kinetic - p["m"] * p["g"] * jnp.sum(q[1::3])


def constraints(t, q, p):
    # Upper end of rod k = lower end of rod k - 1 (the pin at the origin first).
    r = q.reshape(-1, 3)
    half = 0.5 * p["l"] * jnp.stack([-jnp.sin(r[:, 2]), jnp.cos(r[:, 2])], axis=1)
    upper, lower = r[:, :2] + half, r[:, :2] - half
    previous = jnp.concatenate([jnp.zeros((1, 2), q.dtype), lower[:-1]])
    return (previous - upper).ravel()


BY_HAND = lx.System(lagrangian, constraints)


@functools.partial(jax.jit, static_argnums=0)
def run(system, q0, qd0, p):
    return lx.simulate(system, q0, qd0, p, t1=STEPS * DT, solver=lx.RK4(),
                       stepsize_controller=dfx.ConstantStepSize(), dt0=DT,
                       stabilization=lx.NoStabilization(), max_steps=STEPS + 1,
                       initial_tol=float("inf")).q[-1]  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2, 4, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'N':>4s} {'bodies step':>14s} {'by hand step':>14s} {'ratio':>6s} "
          f"{'bodies compile':>15s} {'by hand compile':>16s}")  # fmt: skip
    for N in args.sizes:
        model = lx.systems.chain(N)
        p = {k: jnp.asarray(v) for k, v in model.params.items()}
        q0, qd0 = model.initial_state()
        results = {}
        for name, system in (("bodies", model.system), ("by hand", BY_HAND)):
            start = time.perf_counter()
            jax.block_until_ready(run(system, q0, qd0, p))
            compile_s = time.perf_counter() - start
            _, warm, q = timed(functools.partial(run, system, q0, qd0, p), args.repeats)
            results[name] = (warm / STEPS, compile_s, np.asarray(q))
        # The same equations: the same answer.
        assert np.max(np.abs(results["bodies"][2] - results["by hand"][2])) < 1e-9
        (a, ca, _), (b, cb, _) = results["bodies"], results["by hand"]
        print(f"{N:4d} {1e6 * a:11.1f} us {1e6 * b:11.1f} us {a / b:6.2f} "
              f"{ca:13.2f} s {cb:14.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
