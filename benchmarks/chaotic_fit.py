"""The chaotic double-pendulum fit, lagrax beside CasADi + IPOPT, in one process.

The problem of examples/chaotic_fit.py: a point-mass double pendulum released
from 120 degrees, 10 s of both markers at 100 Hz with 1 mm noise, l1, l2, m2 and
g started 30 % off. Both fit it by multiple shooting with 50 segments of 0.2 s,
the nodes started on the markers (velocities by differences):

- lagrax: `lx.fit(..., segments=50, states_guess=...)`, the model in Cartesian
  coordinates with two length constraints (constrained Gauss-Newton, Jacobians
  by forward mode, simulation by Dopri8 at rtol = atol = 1e-8);
- CasADi Opti + IPOPT as a user would write it: the same pendulum in its two
  angles (minimal coordinates, the textbook equations), RK4 with 2 steps per
  sample, node angles from the markers by atan2, the sum of squared residuals in
  sigma units as the objective, continuity as equality constraints, IPOPT with
  the exact Hessian (CasADi's default).

Reports iterations, warm and first-call wall time, the residual level and each
parameter's error in standard errors (lagrax's), and the ratio of the warm times.

    python benchmarks/chaotic_fit.py [--seconds 10]

Needs `pip install -e ".[bench]"` (casadi).
"""

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import chaotic_fit as problem  # noqa: E402
from _peers import rk4  # noqa: E402

import lagrax as lx  # noqa: E402


jax.config.update("jax_enable_x64", True)
KEYS = ("l1", "l2", "m2", "g")


def lagrax_fit(ts, data):
    guess = (data, np.gradient(data, np.asarray(ts), axis=0))

    def run():
        return lx.fit(
            problem.SYSTEM, problem.START, problem.observe, data, ts=ts,
            initial_state=problem.initial_state, positive=KEYS,
            sigma=problem.NOISE, segments=int(5 * ts[-1]), states_guess=guess,
            progress=False,
        )  # fmt: skip

    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    start = time.perf_counter()
    result = run()
    warm = time.perf_counter() - start
    params = [float(result.params[k]) for k in KEYS]
    stderr = [float(result.stderr[k]) for k in KEYS]
    return dict(
        iterations=result.steps, first=first, warm=warm, params=params,
        stderr=stderr, loss=result.loss, converged=result.converged,
    )  # fmt: skip


def casadi_fit(ts, data, substeps=2):
    import casadi as ca

    dt = float(ts[1] - ts[0])
    samples = len(ts) - 1
    segments = int(5 * ts[-1])
    per = samples // segments
    x, p = ca.SX.sym("x", 4), ca.SX.sym("p", 4)  # (th1, th2, w1, w2), (l1, l2, m2, g)
    th1, th2, w1, w2 = x[0], x[1], x[2], x[3]
    l1, l2, m2, g = p[0], p[1], p[2], p[3]
    d = th1 - th2
    mass = ca.vertcat(ca.horzcat((1 + m2) * l1, m2 * l2 * ca.cos(d)),
                      ca.horzcat(l1 * ca.cos(d), l2))  # fmt: skip
    rhs = ca.vertcat(
        -m2 * l2 * w2**2 * ca.sin(d) - (1 + m2) * g * ca.sin(th1),
        l1 * w1**2 * ca.sin(d) - g * ca.sin(th2),
    )
    f = ca.Function("f", [x, p], [ca.vertcat(w1, w2, ca.solve(mass, rhs))])
    # RK4 over one sample interval
    step = ca.Function("step", [x, p], [rk4(f, x, p, dt / substeps, substeps)])
    r1 = ca.vertcat(l1 * ca.sin(th1), -l1 * ca.cos(th1))
    r2 = r1 + ca.vertcat(l2 * ca.sin(th2), -l2 * ca.cos(th2))
    markers = ca.Function("markers", [x, p], [ca.vertcat(r1, r2)])

    opti = ca.Opti()
    params = opti.variable(4)
    nodes = opti.variable(4, segments + 1)
    start_angle = 2 * np.pi / 3
    opti.subject_to(nodes[:, 0] == ca.DM([start_angle, start_angle, 0, 0]))
    cost = 0
    for k in range(segments):
        state = nodes[:, k]
        for i in range(per):
            index = k * per + i
            residual = (markers(state, params) - data[index]) / problem.NOISE
            cost += ca.sumsqr(residual)
            state = step(state, params)
        opti.subject_to(nodes[:, k + 1] == state)
    cost += ca.sumsqr((markers(nodes[:, -1], params) - data[-1]) / problem.NOISE)
    opti.minimize(cost)
    # Node angles from the markers, rates by differences (as for lagrax).
    link = data[:, 2:] - data[:, :2]
    angles = np.stack(
        [np.arctan2(data[:, 0], -data[:, 1]), np.arctan2(link[:, 0], -link[:, 1])], 1
    )
    angles = np.unwrap(angles, axis=0)
    rates = np.gradient(angles, np.asarray(ts), axis=0)
    guess = np.concatenate([angles, rates], 1)[::per].T
    opti.set_initial(nodes, guess)
    opti.set_initial(params, [problem.START[k] for k in KEYS])
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "tol": 1e-8})
    start = time.perf_counter()
    sol = opti.solve()
    elapsed = time.perf_counter() - start
    stats = opti.stats()
    return dict(
        iterations=stats["iter_count"], warm=elapsed,
        params=[float(v) for v in sol.value(params)], loss=float(sol.value(cost)),
        converged=stats["success"],
    )  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    ts = np.linspace(0.0, args.seconds, int(problem.RATE * args.seconds) + 1)
    data = problem.measurements(jax.numpy.asarray(ts))
    ours = lagrax_fit(jax.numpy.asarray(ts), data)
    peer = casadi_fit(ts, data)
    print(f"{args.seconds:g} s of markers, {data.size} residuals, 30 % off start")
    print(f"{'':18s} {'iter':>5s} {'warm s':>8s} {'first s':>8s} {'rms/sigma':>10s}  "
          + "  ".join(f"{k:>8s}" for k in KEYS))  # fmt: skip
    true = np.array([problem.TRUE[k] for k in KEYS])
    for name, out in (("lagrax", ours), ("CasADi + IPOPT", peer)):
        errors = (np.array(out["params"]) - true) / np.array(ours["stderr"])
        print(
            f"{name:18s} {out['iterations']:5d} {out['warm']:8.2f} "
            f"{out.get('first', float('nan')):8.2f} "
            f"{np.sqrt(out['loss'] / data.size):10.3f}  "
            + "  ".join(f"{e:+8.2f}" for e in errors)
        )
    print("(parameters: error in lagrax's standard errors)")
    print(f"warm time lagrax / CasADi + IPOPT: {ours['warm'] / peer['warm']:.2f}")


if __name__ == "__main__":
    main()
