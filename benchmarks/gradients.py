"""The cost of a gradient: reverse-mode time over forward time, per built-in system.

For each built-in system, a scalar loss of a whole simulated trajectory (positions,
velocities and constraint forces at 21 saved times) is timed as a forward solve
and as `jax.value_and_grad` with respect to all parameters and the initial state,
both jitted and warm (the fastest of the repeats: on a shared 2-core machine the
median wanders by a factor 2), side by side in one run, for diffrax's adjoints.
The goal is a ratio of at most 3.

    python benchmarks/gradients.py [--repeats 7]
"""

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


HORIZON = {"pendulum": 5.0, "slider_pendulum": 3.0, "double_pendulum": 3.0,
           "car_axis": 3.0, "andrews": 0.03}  # fmt: skip
ADJOINTS = {
    "recursive checkpoint": dfx.RecursiveCheckpointAdjoint(),
    "direct": dfx.DirectAdjoint(),
    "backsolve": dfx.BacksolveAdjoint(),
}


def best_times(fns, args, repeats):
    """The fastest of `repeats` runs of each function, the runs interleaved so
    that a slow spell of the machine hits all of them alike."""
    for fn in fns:
        jax.block_until_ready(fn(*args))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, record in zip(fns, times, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            record.append(time.perf_counter() - start)
    return [float(np.min(t)) for t in times]


def measure(model, adjoint, repeats):
    t1 = HORIZON[model.name]
    ts = jnp.linspace(0.0, t1, 21)
    q0, qd0 = model.initial_state()
    params = {k: jnp.asarray(v) for k, v in model.params.items()}

    def loss(params, q0, qd0):
        sol = lx.simulate(
            model.system, q0, qd0, params, t1=t1, ts=ts, adjoint=adjoint,
            max_steps=100_000,
        )  # fmt: skip
        return jnp.sum(sol.q**2) + jnp.sum(sol.qd**2) + jnp.sum(sol.multipliers**2)

    args = (params, q0, qd0)
    value_and_grad = jax.value_and_grad(loss, (0, 1, 2))
    forward, reverse = best_times(
        [jax.jit(loss), jax.jit(value_and_grad)], args, repeats
    )
    return forward, reverse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--systems", nargs="*", default=list(HORIZON))
    args = parser.parse_args()
    print(
        f"{'system':16s} {'adjoint':21s} {'forward':>10s} {'grad':>10s} {'ratio':>6s}"
    )
    for name in args.systems:
        model = lx.systems.get(name)
        for label, adjoint in ADJOINTS.items():
            forward, reverse = measure(model, adjoint, args.repeats)
            print(
                f"{name:16s} {label:21s} {1e3 * forward:8.2f}ms {1e3 * reverse:8.2f}ms "
                f"{reverse / forward:6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
