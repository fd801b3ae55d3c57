"""lagrax against its peers, side by side in one process: work-precision.

For each problem and tolerance, every method solves the same initial value
problem to the same end time; we record the warm wall time (jax: median of
repeats after a compile, whose time is reported separately; NumPy/scipy: median
of repeats) and the largest error of the final positions against an independent
reference (the IVP Test Set's for the car axis; the angle equation in minimal
coordinates solved by scipy at 1e-13 for the pendulum).

Peers (benchmarks/_peers.py), written as a user would write them by hand:
NumPy + scipy.integrate.solve_ivp DOP853 with the KKT matrix solved by
np.linalg.solve; scipy_dae's solve_dae (Radau) on the stabilized index-1 DAE;
jax + diffrax Dopri8 with jnp.linalg.solve of the KKT matrix.

Writes benchmarks/results/peers.md (every run, and the time to reach a final
error below 1e-9 with the ratio of each peer to lagrax) and
benchmarks/results/work_precision.png.

    python benchmarks/peers.py [--repeats 5] [--quick]
"""

import argparse
import platform
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402


matplotlib.use("Agg")
import _peers  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import lagrax as lx  # noqa: E402


RESULTS = Path(__file__).parent / "results"
TOLERANCES = (1e-6, 1e-8, 1e-10, 1e-12)
TARGET = 1e-9
T1 = {"pendulum": 10.0, "car_axis": 3.0}


def reference(name, model, q0, t1):
    if name == "car_axis":
        return np.asarray(model.reference["q"])
    g, l = model.params["g"], model.params["l"]
    th0 = np.arctan2(q0[0], -q0[1])
    sol = solve_ivp(lambda t, s: [s[1], -(g / l) * np.sin(s[0])], (0.0, t1),
                    [th0, 0.0], method="DOP853", rtol=1e-13, atol=1e-13)  # fmt: skip
    th = sol.y[0, -1]
    return np.array([l * np.sin(th), -l * np.cos(th)])


def methods(name, model, q0, v0, t1, repeats):
    """name -> callable(tol) returning (q at t1, compile time or None, warm time)."""
    p = {k: float(v) for k, v in model.params.items()}
    pj = {k: jnp.asarray(v) for k, v in p.items()}
    q0n, v0n = np.asarray(q0), np.asarray(v0)
    handwritten = _peers.jax_diffrax(name)

    def lagrax(stabilization):
        def run(tol):
            def solve():
                return lx.simulate(model.system, q0, v0, pj, t1=t1, rtol=tol,
                                   atol=tol, stabilization=stabilization,
                                   max_steps=1_000_000).q[-1]  # fmt: skip

            first, warm, q = timed(solve, repeats)
            return np.asarray(q), first - warm, warm

        return run

    def jax_peer(tol):
        first, warm, (q, _) = timed(
            lambda: handwritten(pj, q0, v0, jnp.asarray(t1), jnp.asarray(tol)), repeats
        )
        return np.asarray(q), first - warm, warm

    def numpy_peer(fn, reps):
        def run(tol):
            times, q = [], None
            for _ in range(reps):
                start = time.perf_counter()
                q, _ = fn(name, p, q0n, v0n, t1, tol)
                times.append(time.perf_counter() - start)
            return q, None, float(np.median(times))

        return run

    return {
        "lagrax (projection)": lagrax(lx.Projection()),
        "lagrax (no stabilization)": lagrax(lx.NoStabilization()),
        "jax + diffrax by hand": jax_peer,
        "NumPy + solve_ivp DOP853": numpy_peer(_peers.numpy_dop853, 3),
        "scipy_dae Radau": numpy_peer(_peers.scipy_dae_radau, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two tolerances")
    args = parser.parse_args()
    tolerances = TOLERANCES[1:3] if args.quick else TOLERANCES
    RESULTS.mkdir(exist_ok=True)
    rows, best = [], {}
    fig, axes = plt.subplots(1, len(T1), figsize=(12, 4.8), constrained_layout=True)
    for ax, (name, t1) in zip(axes, T1.items(), strict=True):
        model = lx.systems.get(name)
        q0, v0 = model.initial_state()
        ref = reference(name, model, np.asarray(q0), t1)
        for method, run in methods(name, model, q0, v0, t1, args.repeats).items():
            points = []
            for tol in tolerances:
                if method.startswith("scipy_dae") and tol < 1e-10:
                    continue  # minutes per solve, and it does not converge
                q, compile_s, warm = run(tol)
                err = float(np.max(np.abs(q - ref)))
                points.append((warm, err))
                rows.append((name, method, tol, warm, err, compile_s))
                print(f"{name:10s} {method:27s} tol {tol:.0e}  {1e3 * warm:9.2f} ms  "
                      f"err {err:.1e}" + (f"  compile {compile_s:.1f} s"
                      if compile_s is not None else ""), flush=True)  # fmt: skip
                if err < TARGET:
                    key = (name, method)
                    best[key] = min(best.get(key, np.inf), warm)
            w, e = np.array(points).T
            ax.loglog(w, np.maximum(e, 1e-16), "o-", label=method)
        ax.axhline(TARGET, color="0.5", ls=":", lw=1)
        ax.set(title=f"{name} (t = {t1:g})", xlabel="warm wall time [s]",
               ylabel="max |q(t1) − reference|")  # fmt: skip
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Work-precision, one process, one machine: lower left is better")
    fig.savefig(RESULTS / "work_precision.png", dpi=110)
    write_table(rows, best)


def write_table(rows, best):
    lines = [
        "# lagrax against its peers",
        "",
        f"Measured in one run of `python benchmarks/peers.py` on "
        f"{platform.processor() or platform.machine()}, {jax.device_count()} "
        f"{jax.default_backend()} device(s), jax {jax.__version__}.",
        "",
        f"## Time to a final error below {TARGET:g} in q (fastest tolerance that "
        "reaches it)",
        "",
        "| problem | method | warm time | peer / lagrax (projection) |",
        "|---|---|---|---|",
    ]
    for (name, method), warm in sorted(best.items()):
        base = best.get((name, "lagrax (projection)"))
        ratio = f"{warm / base:.1f}x" if base else "n/a"
        lines.append(f"| {name} | {method} | {1e3 * warm:.2f} ms | {ratio} |")
    lines += ["", "## Every run", "",
              "| problem | method | rtol = atol | warm time | error | compile |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for name, method, tol, warm, err, compile_s in rows:
        c = f"{compile_s:.1f} s" if compile_s is not None else ""
        lines.append(f"| {name} | {method} | {tol:.0e} | {1e3 * warm:.2f} ms | "
                     f"{err:.1e} | {c} |")  # fmt: skip
    (RESULTS / "peers.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'peers.md'} and {RESULTS / 'work_precision.png'}")


if __name__ == "__main__":
    main()
