"""lagrax against its peers, side by side in one process: work-precision.

For each problem and tolerance, every method solves the same initial value
problem to the same end time; we record the warm wall time (jax: median of
repeats after a compile, whose time is reported separately; NumPy/scipy: median
of repeats) and the largest error of the final positions, relative to
max(1, |reference|), against an independent reference (the IVP Test Set's for
the car axis and Andrews' squeezer; the angle equation in minimal coordinates
solved by scipy at 1e-13 for the pendulum; the SymPy-derived equations at 1e-13
for the double pendulum).

Peers (benchmarks/_peers.py, _sympy_peer.py), written as a user would write
them: NumPy + scipy.integrate.solve_ivp DOP853 with the KKT matrix solved by
np.linalg.solve; the same with SymPy-derived, lambdified terms (its set-up time
reported); scipy_dae's solve_dae (Radau) on the index-1 DAE; jax + diffrax Dopri8
with jnp.linalg.solve of the KKT matrix.

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

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402


matplotlib.use("Agg")
import _peers  # noqa: E402
import _sympy_peer  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import lagrax as lx  # noqa: E402


RESULTS = Path(__file__).parent / "results"
TOLERANCES = (1e-6, 1e-8, 1e-10, 1e-12)
TARGET = 1e-9
T1 = {"pendulum": 10.0, "car_axis": 3.0, "double_pendulum": 10.0, "andrews": 0.03}
SLOW = 1e-10  # scipy_dae takes minutes per solve below this tolerance
STEPS = {}  # (problem, method, tol) -> accepted + rejected steps of a diffrax solve


def warm_up():
    """One small diffrax solve and one lagrax simulate of a system used nowhere
    else, so that no method's first cost includes the process's one-off start
    (imports, tracing caches of diffrax and equinox)."""

    def bead(t, q, qd, p):  # a bead on the parabola y = x^2
        return 0.5 * qd @ qd - 9.81 * q[1]

    system = lx.System(bead, lambda t, q, p: jnp.stack([q[1] - q[0] ** 2]))
    lx.simulate(system, jnp.array([0.5, 0.25]), jnp.zeros(2), {}, t1=0.1)
    floor_per_step()


def floor_per_step(repeats=20):
    """Warm time per step of diffrax Dopri8 + PID on a 2-D harmonic oscillator:
    the least any solver built on diffrax's Dopri8 loop pays per step here."""

    def field(t, y, args):
        return y[1], -y[0]

    @jax.jit
    def solve(y0, tol):
        sol = dfx.diffeqsolve(dfx.ODETerm(field), dfx.Dopri8(), 0.0, 200.0, None, y0,
                              stepsize_controller=dfx.PIDController(rtol=tol, atol=tol),
                              max_steps=10**6)  # fmt: skip
        return sol.ys[0][-1], sol.stats["num_steps"]

    y0 = (jnp.ones(2), jnp.zeros(2))
    _, warm, (_, steps) = timed(lambda: solve(y0, jnp.asarray(1e-12)), repeats)
    return warm / int(steps)


def reference(name, model, q0, v0, t1):
    """Final positions from an independent source: the IVP Test Set where it has
    them, the angle equation for the pendulum, and the SymPy-derived equations
    at rtol = atol = 1e-13 for the double pendulum."""
    if model.reference is not None:
        return np.asarray(model.reference["q"])
    p = {k: float(v) for k, v in model.params.items()}
    if name == "pendulum":
        g, l = p["g"], p["l"]
        th0 = np.arctan2(q0[0], -q0[1])
        sol = solve_ivp(
            lambda t, s: [s[1], -(g / l) * np.sin(s[0])],
            (0.0, t1),
            [th0, 0.0],
            method="DOP853",
            rtol=1e-13,
            atol=1e-13,
        )
        th = sol.y[0, -1]
        return np.array([l * np.sin(th), -l * np.cos(th)])
    terms, _ = _sympy_peer.derive(name, p, len(q0))
    q, _ = _peers.numpy_dop853(terms, p, q0, v0, t1, 1e-13)
    return q


def methods(name, model, q0, v0, t1, repeats):
    """name -> callable(tol) returning (q at t1, compile time or None, warm time),
    and name -> set-up time (SymPy's derivation) where there is one."""
    p = {k: float(v) for k, v in model.params.items()}
    pj = {k: jnp.asarray(v) for k, v in p.items()}
    q0n, v0n = np.asarray(q0), np.asarray(v0)
    n = len(q0n)
    symbolic, setup = _sympy_peer.derive(name, p, n)
    if name in _peers.TERMS:
        by_hand, by_hand_jax = _peers.TERMS[name], _peers.TERMS[name]
        origin = "by hand"
    else:  # too long by hand: the SymPy-derived terms, lambdified for each
        by_hand = symbolic
        by_hand_jax, _ = _sympy_peer.derive(name, p, n, modules="jax")
        origin = "SymPy terms"
    handwritten = _peers.jax_diffrax(by_hand_jax)

    def lagrax(stabilization, label):
        def run(tol):
            def solve():
                sol = lx.simulate(model.system, q0, v0, pj, t1=t1, rtol=tol,
                                  atol=tol, stabilization=stabilization,
                                  max_steps=1_000_000)  # fmt: skip
                return sol.q[-1], sol.stats["num_steps"]

            first, warm, (q, steps) = timed(solve, repeats)
            STEPS[name, f"lagrax ({label})", tol] = int(steps)
            return np.asarray(q), first - warm, warm

        return run

    def jax_peer(tol):
        first, warm, (q, steps) = timed(
            lambda: handwritten(pj, q0, v0, jnp.asarray(t1), jnp.asarray(tol)), repeats
        )
        STEPS[name, "jax + diffrax", tol] = int(steps)
        return np.asarray(q), first - warm, warm

    def numpy_peer(fn, terms, reps):
        def run(tol):
            times, q = [], None
            for _ in range(reps):
                start = time.perf_counter()
                q, _ = fn(terms, p, q0n, v0n, t1, tol)
                times.append(time.perf_counter() - start)
            return q, None, float(np.median(times))

        return run

    runs = {
        "lagrax (projection)": lagrax(lx.Projection(), "projection"),
        "lagrax (no stabilization)": lagrax(lx.NoStabilization(), "no stabilization"),
        f"jax + diffrax ({origin})": jax_peer,
        f"NumPy + solve_ivp DOP853 ({origin})": numpy_peer(
            _peers.numpy_dop853, by_hand, 3
        ),
        "SymPy + lambdify + DOP853": numpy_peer(_peers.numpy_dop853, symbolic, 3),
        f"scipy_dae Radau ({origin})": numpy_peer(_peers.scipy_dae_radau, by_hand, 1),
    }
    return runs, {"SymPy + lambdify + DOP853": setup}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two tolerances")
    parser.add_argument("--problems", nargs="*", default=list(T1))
    args = parser.parse_args()
    tolerances = TOLERANCES[1:3] if args.quick else TOLERANCES
    RESULTS.mkdir(exist_ok=True)
    warm_up()
    floor = floor_per_step()
    print(f"diffrax Dopri8 floor: {1e6 * floor:.1f} us per step", flush=True)
    rows, best, first_cost, best_tol = [], {}, {}, {}
    fig, axes = plt.subplots(2, 2, figsize=(12, 9.5), constrained_layout=True)
    for ax, name in zip(axes.flat, args.problems, strict=False):
        t1 = T1[name]
        model = lx.systems.get(name)
        q0, v0 = model.initial_state()
        ref = reference(name, model, np.asarray(q0), np.asarray(v0), t1)
        runs, setups = methods(name, model, q0, v0, t1, args.repeats)
        for method, run in runs.items():
            points = []
            for tol in tolerances:
                if method.startswith("scipy_dae") and tol < SLOW:
                    continue
                q, compile_s, warm = run(tol)
                err = float(np.max(np.abs(q - ref) / np.maximum(np.abs(ref), 1.0)))
                points.append((warm, err))
                rows.append((name, method, tol, warm, err))
                if (name, method) not in first_cost:
                    first_cost[name, method] = compile_s or setups.get(method)
                print(f"{name:15s} {method:40s} tol {tol:.0e} {1e3 * warm:9.2f} ms  "
                      f"err {err:.1e}", flush=True)  # fmt: skip
                if err < TARGET:
                    key = (name, method)
                    if warm < best.get(key, np.inf):
                        best[key], best_tol[key] = warm, tol
            w, e = np.array(points).T
            ax.loglog(w, np.maximum(e, 1e-16), "o-", label=method)
        ax.axhline(TARGET, color="0.5", ls=":", lw=1)
        ax.set(title=f"{name} (t = {t1:g})", xlabel="warm wall time [s]",
               ylabel="error of q(t1)")  # fmt: skip
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Work-precision, one process, one machine: lower left is better")
    fig.savefig(RESULTS / "work_precision.png", dpi=110)
    write_table(rows, best, first_cost)
    write_floor(best, best_tol, floor)


def write_floor(best, best_tol, floor):
    """How far any solver on diffrax's Dopri8 loop could beat the NumPy peer."""
    lines = [
        "",
        "## The floor under any diffrax Dopri8 solve",
        "",
        f"diffrax Dopri8 + PID on a 2-D harmonic oscillator (a vector field that "
        f"costs nothing) takes {1e6 * floor:.1f} us per step in this run. Times the "
        "steps that lagrax (no stabilization) took at the tolerance that reached the "
        "target, that is the least any diffrax Dopri8 solve of the problem can "
        "take; NumPy's time over it is the largest ratio such a solve could show.",
        "",
        "| problem | steps | floor | lagrax (no stab.) | NumPy + solve_ivp | "
        "NumPy / floor | NumPy / lagrax |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, method), tol in best_tol.items():
        if method != "lagrax (no stabilization)":
            continue
        numpy_time = next((t for (n, m), t in best.items()
                           if n == name and m.startswith("NumPy")), None)  # fmt: skip
        steps = STEPS[name, method, tol]
        bound = steps * floor
        ours = best[name, method]
        ratio = f"{numpy_time / bound:.0f}x" if numpy_time else "n/a"
        ratio2 = f"{numpy_time / ours:.1f}x" if numpy_time else "n/a"
        numpy_ms = f"{1e3 * numpy_time:.1f} ms" if numpy_time else "not reached"
        cells = [name, steps, f"{1e3 * bound:.2f} ms", f"{1e3 * ours:.2f} ms",
                 numpy_ms, ratio, ratio2]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    with open(RESULTS / "peers.md", "a") as file:
        file.write("\n".join(lines) + "\n")


def write_table(rows, best, first_cost):
    lines = [
        "# lagrax against its peers",
        "",
        f"Measured in one run of `python benchmarks/peers.py` on "
        f"{platform.processor() or platform.machine()}, {jax.device_count()} "
        f"{jax.default_backend()} device(s), jax {jax.__version__}. 'by hand': "
        "equations written out in benchmarks/_peers.py; 'SymPy terms': derived "
        "and lambdified by benchmarks/_sympy_peer.py (too long by hand).",
        "",
        f"## Time to a final error below {TARGET:g} in q",
        "",
        "The fastest of the swept tolerances that reaches it. 'first cost': the "
        "compile of the first solve (jax), or SymPy's derivation and lambdify.",
        "",
        "| problem | method | warm time | / lagrax (projection) | "
        "/ lagrax (no stab.) | first cost |",
        "|---|---|---|---|---|---|",
    ]
    problems = list(dict.fromkeys(row[0] for row in rows))
    methods_ = list(dict.fromkeys(row[1] for row in rows))
    for name in problems:
        base = best.get((name, "lagrax (projection)"))
        plain = best.get((name, "lagrax (no stabilization)"))
        for method in methods_:
            if (name, method) not in first_cost:
                continue
            warm = best.get((name, method))
            cost = first_cost[name, method]
            cost = f"{cost:.2f} s" if cost is not None else ""
            if warm is None:
                lines.append(f"| {name} | {method} | not reached | | | {cost} |")
                continue
            r1 = f"{warm / base:.1f}x" if base else "n/a"
            r2 = f"{warm / plain:.1f}x" if plain else "n/a"
            lines.append(f"| {name} | {method} | {1e3 * warm:.2f} ms | {r1} | {r2} "
                         f"| {cost} |")  # fmt: skip
    lines += ["", "## Every run", "",
              "Error: max over the coordinates of |q(t1) - reference| / max(1, "
              "|reference|) (Andrews' angles reach 16 rad and its reference is good "
              "to about 1e-10 relative). nan: the solver failed (scipy_dae: "
              "'Required step size is less than spacing between numbers').", "",
              "| problem | method | rtol = atol | warm time | error |",
              "|---|---|---|---|---|"]  # fmt: skip
    for name, method, tol, warm, err in rows:
        lines.append(f"| {name} | {method} | {tol:.0e} | {1e3 * warm:.2f} ms | "
                     f"{err:.1e} |")  # fmt: skip
    (RESULTS / "peers.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'peers.md'} and {RESULTS / 'work_precision.png'}")


if __name__ == "__main__":
    main()
