"""The IFToMM A02 benchmark as specified: the N-four-bar with N = 40, 20 s, from
the cranks vertical with the point B0 (crank 0's tip) at 1 m/s along +x, under
gravity. It passes the flat, singular configuration (every bar on the ground
line: J loses 40 ranks) again and again. The reference is the exact motion of its
parallelogram branch (`lagrax.systems.n_four_bar.exact_motion`, one degree of
freedom, scipy to 1e-13), reported as the library reports it: the x coordinate of
B0 over time, and the energy.

    python benchmarks/iftomm_a02.py [--n 40] [--t1 20] [--rtols 1e-8 1e-10]
                                    [--solvers augmented_lagrangian singular_limit]

Prints per solver and tolerance: steps, max |x_B0 error| and |x_B0 error| at t1
(m), max relative energy error, and the run time relative to the first row (one
process, compile excluded). With --figure PATH, plots x_B0 and its error.
"""

import argparse
import math
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402
from lagrax.systems.n_four_bar import exact_motion, state_at  # noqa: E402


SOLVERS = {
    "augmented_lagrangian": lx.AugmentedLagrangian,
    "singular_limit": lx.SingularLimit,
    "least_squares": lx.LeastSquares,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--t1", type=float, default=20.0)
    parser.add_argument("--rtols", type=float, nargs="+", default=[1e-8, 1e-10])
    parser.add_argument("--solvers", nargs="+", choices=sorted(SOLVERS),
                        default=["augmented_lagrangian", "singular_limit"])  # fmt: skip
    parser.add_argument("--max-steps", type=int, default=50_000)
    parser.add_argument("--figure", default=None)
    args = parser.parse_args()

    model = lx.systems.n_four_bar(args.n)
    params = model.params
    length = params["L"]
    # Cranks vertical; B0 = (L cos th, L sin th) moves at -L sin(th) th' = 1 m/s.
    theta0, omega0 = math.pi / 2, -1.0 / length
    q0, qd0 = (jnp.asarray(v) for v in state_at(args.n, theta0, omega0, length))
    ts = np.linspace(0.0, args.t1, 2001)
    theta, energy = exact_motion(args.n, params, ts, theta0, omega0)
    x_exact = length * np.cos(theta)
    print(f"IFToMM A02: N = {args.n} ({q0.shape[0]} coordinates), {args.t1:g} s; "
          f"the flat configuration is passed {_passes(theta)} times")  # fmt: skip
    print(f"{'solver':22s} {'rtol':>7s} {'steps':>6s} {'max x_B0 err':>13s} "
          f"{'err at t1':>10s} {'energy err':>11s} {'time':>6s}")  # fmt: skip
    base, curves = None, {}
    for name in args.solvers:
        for rtol in args.rtols:
            kwargs = dict(t1=args.t1, ts=jnp.asarray(ts), rtol=rtol, atol=rtol,
                          saddle_solver=SOLVERS[name](), throw=False,
                          max_steps=args.max_steps)  # fmt: skip
            run = jax.jit(
                lambda q, qd, kw=kwargs: lx.simulate(model.system, q, qd, params, **kw)
            )
            sol = run(q0, qd0)
            jax.block_until_ready(sol.q)  # compiled; time the second call
            start = time.perf_counter()
            sol = run(q0, qd0)
            jax.block_until_ready(sol.q)
            seconds = time.perf_counter() - start
            base = seconds if base is None else base
            steps = int(sol.stats["num_steps"])
            if sol.result != lx.RESULTS.successful:
                status = lx.RESULTS[sol.result].split(":")[0]
                print(f"{name:22s} {rtol:7.0e} {steps:6d} failed: {status}")
                continue
            x = np.asarray(sol.q[:, 0]) + length / 2 * np.cos(np.asarray(sol.q[:, 2]))
            error = np.abs(x - x_exact)
            drift = np.max(np.abs(np.asarray(sol.energy) - energy[0]))
            curves[f"{name}, rtol {rtol:g}"] = error
            print(f"{name:22s} {rtol:7.0e} {steps:6d} {error.max():13.2e} "
                  f"{error[-1]:10.2e} {drift / abs(energy[0]):11.2e} "
                  f"{seconds / base:5.2f}x", flush=True)  # fmt: skip
    if args.figure:
        _figure(args, ts, x_exact, curves)


def _passes(theta):
    """How often the exact motion passes the flat configuration (sin th = 0)."""
    s = np.sin(theta)
    return int(np.sum(np.sign(s[1:]) != np.sign(s[:-1])))


def _figure(args, ts, x_exact, curves):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True,
                                      constrained_layout=True)  # fmt: skip
    top.plot(ts, x_exact, color="k", lw=1.0)
    top.set_ylabel("x of B0 [m]")
    top.set_title(f"IFToMM A02, N = {args.n}: exact branch motion")
    for label, error in curves.items():
        bottom.semilogy(ts, np.maximum(error, 1e-16), lw=1.0, label=label)
    bottom.set(xlabel="t [s]", ylabel="|x_B0 - exact| [m]")
    bottom.legend(fontsize=8)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    fig.savefig(args.figure, dpi=110)
    print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
