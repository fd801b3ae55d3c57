"""Through singular configurations: the N-four-bar (IFToMM A02) against the exact
motion of its parallelogram branch, per saddle solver and tolerance.

The mechanism starts flat (every bar on the x axis: the constraint Jacobian loses
N ranks) with the cranks at 1 rad/s, and passes a singular configuration eight
times in 10 s. For each solver and rtol (= atol), the max crank-angle error and
the max energy error relative to the initial energy, against
`lagrax.systems.n_four_bar.exact_motion` (the branch's one-degree-of-freedom
motion solved by scipy to 1e-13). Accuracy, not time: nothing here is timed.

    python benchmarks/singular.py [--n 1 10] [--rtols 1e-6 1e-8 1e-10 1e-12]
                                  [--solvers augmented_lagrangian singular_limit
                                   least_squares] [--rconds 1e-5 1e-4 1e-3]

`singular_limit` is `SingularLimit(SchurCholesky(), rcond)` for each `--rconds`
(default its own default).
"""

import argparse

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402
from lagrax.systems.n_four_bar import exact_motion  # noqa: E402


SOLVERS = {
    "schur_cholesky": lx.SchurCholesky,
    "least_squares": lx.LeastSquares,
    "augmented_lagrangian": lx.AugmentedLagrangian,
    "singular_limit": lx.SingularLimit,
}


def _variants(name, rconds):
    """(label, solver) pairs: one per rcond for singular_limit."""
    if name != "singular_limit":
        return [(name, SOLVERS[name]())]
    if not rconds:
        return [(name, lx.SingularLimit())]
    return [(f"{name} {r:g}", lx.SingularLimit(rcond=r)) for r in rconds]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rtols", type=float, nargs="+",
                        default=[1e-6, 1e-8, 1e-10, 1e-12])  # fmt: skip
    parser.add_argument("--solvers", nargs="+", choices=sorted(SOLVERS),
                        default=["augmented_lagrangian", "singular_limit",
                                 "least_squares"])  # fmt: skip
    parser.add_argument("--rconds", type=float, nargs="*", default=[])
    parser.add_argument("--max-steps", type=int, default=20_000)
    args = parser.parse_args()
    ts = np.linspace(0.0, 10.0, 201)
    print(f"{'N':>3s} {'solver':26s} {'rtol':>7s} {'steps':>6s} {'angle error':>12s} "
          f"{'energy error':>12s}")  # fmt: skip
    for n in args.n:
        model = lx.systems.n_four_bar(n)
        q0, qd0 = model.initial_state()
        theta, energy = exact_motion(n, model.params, ts)
        variants = [v for name in args.solvers for v in _variants(name, args.rconds)]
        for name, solver in variants:
            for rtol in args.rtols:
                sol = lx.simulate(
                    model.system, q0, qd0, model.params, t1=10.0, ts=jnp.asarray(ts),
                    saddle_solver=solver, rtol=rtol, atol=rtol, throw=False,
                    max_steps=args.max_steps,
                )  # fmt: skip
                steps = int(sol.stats["num_steps"])
                if sol.result != lx.RESULTS.successful:
                    status = lx.RESULTS[sol.result].split(":")[0]
                    print(f"{n:3d} {name:26s} {rtol:7.0e} {steps:6d} failed: {status}")
                    continue
                angle = np.max(np.abs(np.asarray(sol.q[:, 2]) - theta))
                drift = np.max(np.abs(np.asarray(sol.energy) - energy[0]))
                print(f"{n:3d} {name:26s} {rtol:7.0e} {steps:6d} {angle:12.2e} "
                      f"{drift / abs(energy[0]):12.2e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
