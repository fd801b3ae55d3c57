"""The cost of a gradient: derivative time over forward time, per built-in system.

For each built-in system, a scalar loss of a whole simulated trajectory (positions,
velocities and constraint forces at 21 saved times) is timed as a forward solve,
as `jax.value_and_grad` (reverse mode) with respect to all parameters and the
initial state for diffrax's adjoints, and as `jax.jacfwd` (forward mode, diffrax's
`ForwardMode`, one tangent per input: what `lx.fit` uses), all jitted and warm
(the fastest of the repeats: on a shared 2-core machine the median wanders by a
factor 2), side by side in one run. The goal is a ratio of at most 3. `inputs` is
the number of differentiated scalars (forward mode's cost grows with it, reverse
mode's does not).

    python benchmarks/gradients.py [--repeats 7] [--systems pendulum top]
"""

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


# Seconds simulated: a few periods of each system's motion (Andrews' squeezer
# turns fast).
HORIZON = {name: 3.0 for name in lx.systems.BUILTIN} | {"pendulum": 5.0,
                                                         "andrews": 0.03}  # fmt: skip
ADJOINTS = {
    "recursive checkpoint": dfx.RecursiveCheckpointAdjoint(),
    "direct": dfx.DirectAdjoint(),
    "backsolve": dfx.BacksolveAdjoint(),
    "forward mode (jacfwd)": dfx.ForwardMode(),
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
    if isinstance(adjoint, dfx.ForwardMode):
        derivative = jax.jacfwd(loss, (0, 1, 2))
    else:
        derivative = jax.value_and_grad(loss, (0, 1, 2))
    forward, derived = best_times([jax.jit(loss), jax.jit(derivative)], args, repeats)
    inputs = sum(np.size(x) for x in jax.tree.leaves(args))
    return forward, derived, inputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--systems", nargs="*", default=list(HORIZON))
    args = parser.parse_args()
    print(
        f"{'system':16s} {'inputs':>6s} {'derivative':22s} {'forward':>10s} "
        f"{'derivative':>10s} {'ratio':>6s}"
    )
    for name in args.systems:
        model = lx.systems.get(name)
        for label, adjoint in ADJOINTS.items():
            try:
                forward, derived, inputs = measure(model, adjoint, args.repeats)
            except Exception as e:  # an adjoint that cannot treat this system
                print(f"{name:16s} {'':6s} {label:22s} failed: {str(e)[:60]}")
                continue
            print(
                f"{name:16s} {inputs:6d} {label:22s} {1e3 * forward:8.2f}ms "
                f"{1e3 * derived:8.2f}ms {derived / forward:6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
