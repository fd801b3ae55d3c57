"""Accuracy and cost on published index-3 benchmarks, for each stabilization.

Andrews' squeezing mechanism (t = 0.03) and the car axis (t = 3, a time-dependent
constraint), against the IVP Test Set's reference solutions, over a tolerance
sweep with lagrax's defaults (Dopri8, SchurCholesky). Prints, per run: steps, the
warm wall time (median), the compile time (once per problem and stabilization:
other tolerances reuse the compiled solve), and the largest relative error of the
positions, velocities and multipliers (errors of components below 1e-3 are taken
relative to 1e-3, as the test set's references are accurate to about 1e-10 in
absolute terms).

    python benchmarks/published.py [--repeats 5]
"""

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


STABILIZATIONS = {
    "none": lx.NoStabilization(),
    "baumgarte(10,10)": lx.Baumgarte(10.0, 10.0),
    "projection": lx.Projection(),
}


def relative_error(value, reference):
    reference = np.asarray(reference)
    scale = np.maximum(np.abs(reference), 1e-3)
    return float(np.max(np.abs(np.asarray(value) - reference) / scale))


def run(model, stabilization, tol, repeats):
    reference = model.reference
    q0, qd0 = model.initial_state()

    def solve():
        sol = lx.simulate(
            model.system, q0, qd0, model.params, t1=reference["t"], rtol=tol,
            atol=tol, stabilization=stabilization, max_steps=100_000,
        )  # fmt: skip
        return jax.block_until_ready(sol)

    start = time.perf_counter()
    sol = solve()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        solve()
        times.append(time.perf_counter() - start)
    warm = float(np.median(times))
    return {
        "steps": int(sol.stats["num_steps"]),
        "warm": warm,
        "compile": first - warm,
        "q": relative_error(sol.q[-1], reference["q"]),
        "qd": relative_error(sol.qd[-1], reference["qd"]),
        "lam": relative_error(sol.multipliers[-1], reference["multipliers"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    problems = [lx.systems.andrews(), lx.systems.car_axis()]
    print(
        f"{'problem':9s} {'stabilization':17s} {'tol':>6s} {'steps':>6s} "
        f"{'warm [ms]':>9s} {'compile [s]':>11s} {'err q':>8s} {'err qd':>8s} "
        f"{'err lam':>8s}"
    )
    for model in problems:
        for label, stabilization in STABILIZATIONS.items():
            for i, tol in enumerate((1e-6, 1e-8, 1e-10, 1e-12)):
                r = run(model, stabilization, tol, args.repeats)
                # New tolerances reuse the compiled solve: compile time once.
                compile_time = f"{r['compile']:11.2f}" if i == 0 else f"{'-':>11s}"
                print(
                    f"{model.name:9s} {label:17s} {tol:6.0e} {r['steps']:6d} "
                    f"{1e3 * r['warm']:9.1f} {compile_time} {r['q']:8.1e} "
                    f"{r['qd']:8.1e} {r['lam']:8.1e}"
                )


if __name__ == "__main__":
    main()
