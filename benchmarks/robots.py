"""lagrax against MuJoCo C and MJX on gymnasium's robots, fixed RK4 steps.

gymnasium's MuJoCo models (hopper, walker2d, half_cheetah, ant, humanoid) with
contacts and joint limits disabled, no medium, zero controls and MuJoCo's RK4 at
the model's own timestep: a jointed tree in free flight under gravity, with the
joints' damping, armature and stiffness, all of which `lb.from_mjcf` reads. Side
by side, from the same states (joint velocities drawn around qpos0):

- MuJoCo C: `mujoco.rollout` (one thread) of `mj_step`;
- MJX (mujoco-mjx): `jax.jit` of a `jax.lax.scan` of `mjx.step`, `jax.vmap` for
  batches, in this process in float64; where that fails (the humanoid: an
  int32/int64 scan carry), in float32 in a process of its own, marked;
- lagrax: `jax.jit` of `lx.simulate` with classical RK4 at the same fixed step
  (default stabilization, projection), `jax.vmap` for batches; each model in a
  process of its own with a timeout, so that a crash or an endless compile
  fills its cells with "failed: <reason>" and the benchmark goes on.

Measured for each model: (a) the warm time per step of one trajectory (median of
--repeats), and the largest |qpos - qpos of MuJoCo C| at its end; (b) trace +
lower and compile times, `jax.jit(f).lower(...)` and `.compile()` timed apart;
(c) system-steps per second of batches; (d) work-precision: the time lagrax
(adaptive, its default solver, rtol = atol swept) and MuJoCo C (RK4 at dt / 2^k)
take to reach an error in qpos of 1e-6 and 1e-9 after about 1 s (a whole number
of the model's steps), against MuJoCo RK4 at dt / 256 Richardson-extrapolated
with dt / 128. MJX and lagrax compile with XLA:CPU's loop emitters, as
`lagrax run` and the tests do (--xla-defaults: XLA's defaults).

Prints a markdown table as it fills (progress on stderr) and writes it to --out
(benchmarks/results/robots.md; nothing under --quick unless --out is given).

    python benchmarks/robots.py [--models hopper,ant] [--steps 1000]
        [--batches 256,4096] [--quick] [--skip-lagrax] [--skip-mjx]
"""

import argparse
import contextlib
import importlib.metadata
import importlib.resources
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax


# The float32 MJX worker is the one process that runs without x64.
jax.config.update("jax_enable_x64", "--float32" not in sys.argv)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

import lagrax  # noqa: E402, F401  (sizes XLA's CPU pool before the backend starts)


try:
    import mujoco.rollout as mj_rollout
except ImportError:  # an older MuJoCo: a loop of mj_step
    mj_rollout = None


RESULTS = Path(__file__).parent / "results"
ASSETS = importlib.resources.files("gymnasium") / "envs" / "mujoco" / "assets"
MODELS = ("hopper", "walker2d", "half_cheetah", "ant", "humanoid")
SCALE = 0.5  # standard deviation of the initial joint velocities (rad/s, m/s)
SEED_ONE, SEED_BATCH = 0, 1
TOLERANCES = tuple(10.0**-k for k in range(5, 13))  # lagrax's rtol = atol
COARSEN, REFINE = 2, 6  # MuJoCo C's steps: 2^COARSEN dt, ..., dt, ..., dt/2^REFINE
REFERENCE = 8  # the reference: dt/2^REFERENCE, Richardson with dt/2^(REFERENCE-1)
TARGETS = (1e-6, 1e-9)
LOOP_EMITTERS = {"xla_cpu_use_fusion_emitters": False}
SHOWN = 8  # final states of a batch compared with MuJoCo C's
# MJX's parameters its gradient is taken in (lagrax: all of the model's).
GRADIENT_FIELDS = ("body_mass", "body_inertia", "dof_damping", "dof_armature")


# -- The models and their states ---------------------------------------------


def load(name):
    """A gymnasium model: no contacts, no joint limits, no medium, RK4."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS / f"{name}.xml"))
    off = mujoco.mjtDisableBit
    m.opt.disableflags |= off.mjDSBL_CONTACT | off.mjDSBL_LIMIT
    m.opt.density = m.opt.viscosity = 0.0
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    return m


def initial_states(m, batch, seed):
    """(batch, nq) qpos0 and (batch, nv) random joint velocities."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(m.qpos0, (batch, 1))
    return qpos, SCALE * rng.standard_normal((batch, m.nv))


def horizon(m):
    """A whole number of the model's steps, about 1 s."""
    n = max(1, round(1.0 / m.opt.timestep))
    return n, n * m.opt.timestep


def compile_options(args):
    if args.xla_defaults or jax.default_backend() != "cpu":
        return None
    return LOOP_EMITTERS


def lower_compile(fn, inputs, options):
    """(the jitted fn, trace + lower seconds, compile seconds).

    Timed in two stages ahead of time; the calls then go through `jax.jit`, as
    a user's do: its first call reuses the executable compiled here, and its
    dispatch is JAX's fast path. (Calling the ahead-of-time `Compiled` object
    instead costs 0.1-1 ms more per call here, most of a work-precision run of
    a few adaptive steps.)"""
    jitted = jax.jit(fn, compiler_options=options)
    start = time.perf_counter()
    lowered = jitted.lower(*inputs)
    lower = time.perf_counter() - start
    start = time.perf_counter()
    lowered.compile()
    return jitted, lower, time.perf_counter() - start


def measure_jit(fn, inputs, steps, batch, repeats, options):
    """Lower, compile and time a jitted program whose first output is the final
    qpos (batch, nq) or (nq,)."""
    jitted, lower, comp = lower_compile(fn, inputs, options)
    _, warm, out = timed(lambda: jitted(*inputs), repeats)
    qpos = np.asarray(out[0] if isinstance(out, tuple) else out)
    return {
        "lower": lower,
        "compile": comp,
        "warm": warm,
        "per_step": warm / steps,
        "steps_per_s": batch * steps / warm,
        "qpos": qpos.reshape(-1, qpos.shape[-1])[:SHOWN].tolist(),
    }


# -- The three engines ---------------------------------------------------------
# MJX and lagrax are generators of (key, result) pairs, run in this process or
# in a worker process that prints them as they come.


def mujoco_c(name, args, wp):
    """MuJoCo C's measurements, in this process."""
    m = load(name)
    data = mujoco.MjData(m)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS

    def states(qpos, qvel):
        out = np.zeros((len(qpos), mujoco.mj_stateSize(m, spec)))
        for i in range(len(qpos)):
            data.qpos[:], data.qvel[:] = qpos[i], qvel[i]
            data.time = 0.0
            mujoco.mj_getState(m, data, out[i], spec)
        return out

    def rollout(start, n):
        """The states after each step (or only the last) from each start."""
        if mj_rollout is not None:
            return lambda: mj_rollout.rollout(m, data, start, nstep=n)[0]

        def loop():
            out = np.zeros((len(start), 1, start.shape[1]))
            for i, state in enumerate(start):
                mujoco.mj_setState(m, data, state, spec)
                for _ in range(n):
                    mujoco.mj_step(m, data)
                mujoco.mj_getState(m, data, out[i, 0], spec)
            return out

        return loop

    results = {}
    qpos, qvel = initial_states(m, 1, SEED_ONE)
    _, warm, out = timed(rollout(states(qpos, qvel), args.steps), args.repeats)
    final_qpos = out[:, -1, 1 : 1 + m.nq]
    results["single"] = {"per_step": warm / args.steps, "qpos": final_qpos}
    for batch in args.batches:
        qpos, qvel = initial_states(m, batch, SEED_BATCH)
        reps = max(1, args.repeats - 2)
        _, warm, out = timed(rollout(states(qpos, qvel), args.batch_steps), reps)
        results[f"batch {batch}"] = {
            "steps_per_s": batch * args.batch_steps / warm,
            "qpos": out[:SHOWN, -1, 1 : 1 + m.nq],
        }
    if not wp:
        return results
    # Work-precision: RK4 at dt / 2^k over the same ~1 s from the single state.
    dt = m.opt.timestep
    n, _ = horizon(m)
    start = states(*initial_states(m, 1, SEED_ONE))

    def final(k):
        m.opt.timestep = dt / 2**k
        try:
            return rollout(start, n * 2**k)()[0, -1, 1 : 1 + m.nq]
        finally:
            m.opt.timestep = dt

    fine, finer = final(REFERENCE - 1), final(REFERENCE)
    reference = finer + (finer - fine) / 15
    error = np.max(np.abs(finer - fine)) / 15
    results["reference"] = {"qpos": reference, "error": error}
    for k in range(-COARSEN, REFINE + 1):
        if n % 2 ** max(0, -k):
            continue  # the step does not divide the horizon
        m.opt.timestep = dt / 2.0**k
        try:
            _, warm, out = timed(rollout(start, round(n * 2.0**k)), args.repeats)
        finally:
            m.opt.timestep = dt
        error = float(np.max(np.abs(out[0, -1, 1 : 1 + m.nq] - reference)))
        label = f"dt/{2**k}" if k > 0 else f"{2**-k} dt" if k < 0 else "dt"
        results[f"wp {k}"] = {"time": warm, "error": error, "label": label}
    return results


def import_mjx():
    """mujoco.mjx, its print about the missing warp sent to stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        from mujoco import mjx
    return mjx


def mjx_engine(name, args):
    mjx = import_mjx()

    m = load(name)
    if m.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        yield "note", "PGS solver set to Newton, which MJX takes (no constraint is on)"
    options = compile_options(args)
    start = time.perf_counter()
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)
    yield "setup", {"seconds": time.perf_counter() - start}
    dtype = d0.qpos.dtype

    def trajectory(steps):
        def run(mx, d0, qpos, qvel):
            def step(d, _):
                return mjx.step(mx, d), None

            d = d0.replace(qpos=qpos, qvel=qvel)
            return jax.lax.scan(step, d, None, length=steps)[0].qpos

        return run

    qpos, qvel = (x.astype(dtype) for x in initial_states(m, 1, SEED_ONE))
    inputs = (mx, d0, qpos[0], qvel[0])
    yield (
        "single",
        measure_jit(
            trajectory(args.steps), inputs, args.steps, 1, args.repeats, options
        ),
    )

    # The cost of a gradient, as for lagrax below: value_and_grad of the same
    # loss with respect to the model's inertial and joint parameters, reverse
    # mode through the scan (JAX stores every step's residuals).
    import jax.numpy as jnp

    theta = {f: getattr(mx, f) for f in GRADIENT_FIELDS}

    def loss(theta, mx, d0, qpos, qvel):
        qpos = trajectory(args.steps)(mx.replace(**theta), d0, qpos, qvel)
        return jnp.sum(qpos**2)

    timings = {}
    for key, fn in (("forward", loss), ("grad", jax.value_and_grad(loss))):
        jitted, _, _ = lower_compile(fn, (theta, *inputs), options)
        _, timings[key], _ = timed(lambda j=jitted: j(theta, *inputs), args.repeats)
    yield "grad", timings

    for batch in args.batches:
        qpos, qvel = (x.astype(dtype) for x in initial_states(m, batch, SEED_BATCH))
        run = jax.vmap(trajectory(args.batch_steps), in_axes=(None, None, 0, 0))
        yield f"batch {batch}", measure_jit(
            run, (mx, d0, qpos, qvel), args.batch_steps, batch,
            max(1, args.repeats - 2), options,
        )  # fmt: skip


def lagrax_engine(name, args, wp):
    import jax.numpy as jnp

    import lagrax as lx
    import lagrax.bodies as lb

    m = load(name)
    options = compile_options(args)
    start = time.perf_counter()
    model = lb.from_mjcf(m)
    yield "setup", {"seconds": time.perf_counter() - start}
    params = jax.tree.map(np.asarray, model.params)
    dt = m.opt.timestep
    to_lagrax = jax.jit(jax.vmap(model.from_joint_space))

    def trajectory(steps):
        def run(q0, qd0, params):
            sol = lx.simulate(model.system, q0, qd0, params, t1=steps * dt,
                              solver=lx.RK4(), dt0=dt,
                              max_steps=steps + 10)  # fmt: skip
            return model.to_joint_space(sol.q[-1], sol.qd[-1])[0]

        return run

    q0, qd0 = to_lagrax(*initial_states(m, 1, SEED_ONE))
    inputs = (q0[0], qd0[0], params)
    yield (
        "single",
        measure_jit(
            trajectory(args.steps), inputs, args.steps, 1, args.repeats, options
        ),
    )

    # The cost of a gradient: value_and_grad of a loss of the trajectory with
    # respect to every parameter (masses, inertias, dampings, ...), reverse mode
    # (diffrax's recursive checkpointing), against the forward solve.
    def loss(q0, qd0, params):
        return jnp.sum(trajectory(args.steps)(q0, qd0, params) ** 2)

    timings = {}
    for key, fn in (("forward", loss), ("grad", jax.value_and_grad(loss, 2))):
        jitted, _, _ = lower_compile(fn, inputs, options)
        _, timings[key], _ = timed(lambda j=jitted: j(*inputs), args.repeats)
    yield "grad", timings
    for batch in args.batches:
        q0, qd0 = to_lagrax(*initial_states(m, batch, SEED_BATCH))
        run = jax.vmap(trajectory(args.batch_steps), in_axes=(0, 0, None))
        yield f"batch {batch}", measure_jit(
            run, (q0, qd0, params), args.batch_steps, batch,
            max(1, args.repeats - 2), options,
        )  # fmt: skip
    if not wp:
        return
    _, t1 = horizon(m)

    def adaptive(q0, qd0, params, tol):
        sol = lx.simulate(model.system, q0, qd0, params, t1=t1, rtol=tol, atol=tol,
                          max_steps=100_000)  # fmt: skip
        return model.to_joint_space(sol.q[-1], sol.qd[-1])[0], sol.stats["num_steps"]

    q0, qd0 = to_lagrax(*initial_states(m, 1, SEED_ONE))
    tol = np.asarray(TOLERANCES[0])
    inputs = (q0[0], qd0[0], params, tol)
    jitted, lower, comp = lower_compile(adaptive, inputs, options)
    yield "wp compile", {"lower": lower, "compile": comp}
    for tol in TOLERANCES:
        call = lambda tol=tol: jitted(q0[0], qd0[0], params, np.asarray(tol))
        _, warm, (qpos, steps) = timed(call, args.repeats)
        yield (
            f"wp {tol:.0e}",
            {
                "time": warm,
                "qpos": np.asarray(qpos).tolist(),
                "steps": int(steps),
                "label": f"tol {tol:.0e}",
            },
        )


# -- Worker processes ------------------------------------------------------------


def worker(args):
    """Run one engine on one model, printing each result as a line."""
    if args.worker == "lagrax":
        results = lagrax_engine(args.model, args, not args.no_wp)
    else:
        results = mjx_engine(args.model, args)
    for key, value in results:
        print("RESULT " + json.dumps([key, value]), flush=True)


def in_worker(engine, name, args, timeout, extra=()):
    """(results, failure or None): `engine` on model `name` in a process of its
    own, its results kept as they come (a crash keeps those before it)."""
    cmd = [sys.executable, __file__, "--worker", engine, "--model", name,
           "--steps", str(args.steps), "--batch-steps", str(args.batch_steps),
           "--batches", ",".join(map(str, args.batches)),
           "--repeats", str(args.repeats), *extra]  # fmt: skip
    cmd += ["--xla-defaults"] * args.xla_defaults + ["--no-wp"] * (not args.wp)
    results = {}
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True)

        def read():
            for line in proc.stdout:
                if line.startswith("RESULT "):
                    key, value = json.loads(line[7:])
                    if key == "note":
                        results.setdefault("notes", []).append(value)
                        continue
                    results[key] = value
                    progress(f"  {name} {engine}: {key} done")

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            reader.join()
            return results, f"timed out after {timeout:.0f} s"
        reader.join()
        if proc.returncode == 0:
            return results, None
        errors.seek(0)
        lines = [line.strip() for line in errors if line.strip()]
    if proc.returncode < 0:
        import signal

        reason = f"killed by {signal.Signals(-proc.returncode).name}"
    else:
        reason = next(
            (line for line in reversed(lines) if "Error" in line or "error" in line),
            lines[-1] if lines else f"exit status {proc.returncode}",
        )
    return results, reason[:300]


def progress(message):
    print(message, file=sys.stderr, flush=True)


# -- The table ---------------------------------------------------------------------


def seconds(x):
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{1e3 * x:.2f} ms"
    return f"{1e6 * x:.1f} us"


def rate(x):
    return f"{x:.3g} steps/s"


def ratio(a, b):
    return f"{a / b:.3g}x" if a is not None and b is not None and b > 0 else ""


class Engine:
    """One engine's results on one model: the cells, or why there are none."""

    def __init__(self, results=None, failure=None, mark=""):
        self.results, self.failure, self.mark = results or {}, failure, mark

    def get(self, key, field):
        return self.results.get(key, {}).get(field)

    def cell(self, key, field, fmt):
        value = self.get(key, field)
        if value is not None:
            return fmt(value) + self.mark
        if self.failure in ("skipped", None):
            return self.failure or "n/a"
        return f"failed: {self.failure}"


def max_error(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = min(len(a), len(b))
    return float(np.max(np.abs(a[:n] - b[:n])))


def time_to(results, target, errors):
    """The fastest work-precision point under `target`: (time, label) or None."""
    best = None
    for key, error in errors.items():
        point = results[key]
        if error < target and (best is None or point["time"] < best[0]):
            best = point["time"], point["label"], point.get("steps")
    return best


def rows_for(name, m, args, c, mjx, lx):
    """The table's rows for one model (lists of cells), and notes."""
    rows, notes = [], []

    def row(measure, c_cell, mjx_cell, lx_cell, r_mjx="", r_c=""):
        rows.append([name, measure, c_cell, mjx_cell, lx_cell, r_mjx, r_c])

    us = lambda x: f"{1e6 * x:.1f} us"
    per = {e: e.get("single", "per_step") for e in (mjx, lx)}
    row(f"per step, one trajectory of {args.steps} (warm)",
        us(c["single"]["per_step"]), mjx.cell("single", "per_step", us),
        lx.cell("single", "per_step", us),
        ratio(per[lx], per[mjx]), ratio(per[lx], c["single"]["per_step"]))  # fmt: skip
    reference = c["single"]["qpos"][0]
    err = {
        e: max_error(e.get("single", "qpos")[0], reference)
        for e in (mjx, lx)
        if e.get("single", "qpos") is not None
    }
    grad = {e: e.get("grad", "grad") for e in (mjx, lx)}
    forward = {e: e.get("grad", "forward") for e in (mjx, lx)}

    def gradient(e):
        if not (grad[e] and forward[e]):
            return e.cell("grad", "grad", str)
        return (f"{1e3 * grad[e]:.1f} ms / {1e3 * forward[e]:.1f} ms = "
                f"{grad[e] / forward[e]:.2f}x{e.mark}")  # fmt: skip

    row("value_and_grad of a loss of that trajectory / forward (lagrax: all "
        "parameters; MJX: masses, inertias, damping, armature)", "",
        gradient(mjx), gradient(lx), ratio(grad[lx], grad[mjx]))  # fmt: skip
    row(f"max abs qpos - MuJoCo C's after {args.steps} steps", "0 (reference)",
        f"{err[mjx]:.1e}{mjx.mark}" if mjx in err else mjx.cell("single", "qpos", str),
        f"{err[lx]:.1e}" if lx in err else lx.cell("single", "qpos", str))  # fmt: skip
    row(
        "set-up: mjx.put_model + make_data / lb.from_mjcf",
        "",
        mjx.cell("setup", "seconds", seconds),
        lx.cell("setup", "seconds", seconds),
    )
    for field, what in (("lower", "trace + lower, one trajectory"),
                        ("compile", "compile, one trajectory")):  # fmt: skip
        a, b = lx.get("single", field), mjx.get("single", field)
        row(what, "", mjx.cell("single", field, seconds),
            lx.cell("single", field, seconds), ratio(a, b))  # fmt: skip
    for batch in args.batches:
        key = f"batch {batch}"
        c_rate = c[key]["steps_per_s"]
        mjx_rate, lx_rate = mjx.get(key, "steps_per_s"), lx.get(key, "steps_per_s")
        # Ratios of time per system-step: > 1 where lagrax is slower.
        row(f"batch {batch} x {args.batch_steps} steps: system-steps/s",
            rate(c_rate), mjx.cell(key, "steps_per_s", rate),
            lx.cell(key, "steps_per_s", rate), ratio(mjx_rate, lx_rate),
            ratio(c_rate, lx_rate))  # fmt: skip
        compile_time = {
            e: e.get(key, "lower") + e.get(key, "compile")
            for e in (mjx, lx)
            if e.get(key, "compile") is not None
        }
        errs = {
            e: max_error(np.ravel(e.get(key, "qpos")), np.ravel(c[key]["qpos"]))
            for e in (mjx, lx)
            if e.get(key, "qpos") is not None
        }

        def both(e, compile_time=compile_time, errs=errs, key=key):
            if e not in compile_time:
                return e.cell(key, "compile", str)
            return f"{seconds(compile_time[e])}; err {errs[e]:.1e}{e.mark}"

        row(f"batch {batch}: trace + lower + compile; max abs qpos error of "
            f"{min(batch, SHOWN)} members", "", both(mjx), both(lx),
            ratio(compile_time.get(lx), compile_time.get(mjx)))  # fmt: skip
    if "reference" not in c:
        return rows, notes
    _, t1 = horizon(m)
    reference = c["reference"]["qpos"]
    c_errors = {k: v["error"] for k, v in c.items() if k.startswith("wp ")}
    lx_errors = {
        k: max_error(v["qpos"], reference)
        for k, v in lx.results.items()
        if k.startswith("wp ") and "qpos" in v
    }
    for target in TARGETS:
        ours = time_to(lx.results, target, lx_errors)
        theirs = time_to(c, target, c_errors)
        if ours:
            lx_cell = f"{seconds(ours[0])} ({ours[1]}, {ours[2]} steps)"
        elif lx_errors:
            lx_cell = f"not reached (best {min(lx_errors.values()):.1e})"
        else:
            lx_cell = lx.cell("wp compile", "compile", str)
        c_cell = f"{seconds(theirs[0])} ({theirs[1]})" if theirs else "not reached"
        row(f"time to max abs qpos error < {target:g} at t = {t1:g} s", c_cell, "",
            lx_cell, "", ratio(ours and ours[0], theirs and theirs[0]))  # fmt: skip
    if lx.get("wp compile", "compile") is not None:
        w = lx.results["wp compile"]
        row("adaptive lagrax: trace + lower, compile", "", "",
            f"{seconds(w['lower'])}, {seconds(w['compile'])}")  # fmt: skip
    points = [f"{c[k]['label']} {e:.1e} in {seconds(c[k]['time'])}"
              for k, e in c_errors.items()]  # fmt: skip
    notes.append(f"{name}: MuJoCo C RK4's qpos errors at t = {t1:g} s: "
                 + ", ".join(points) + ".")  # fmt: skip
    if lx_errors:
        points = [f"{lx.results[k]['label']} {e:.1e} in {lx.results[k]['steps']} "
                  f"steps, {seconds(lx.results[k]['time'])}"
                  for k, e in lx_errors.items()]  # fmt: skip
        notes.append(f"{name}: lagrax adaptive's qpos errors at t = {t1:g} s: "
                     + ", ".join(points) + ".")  # fmt: skip
    return rows, notes


HEADER = ["model", "measure", "MuJoCo C", "MJX", "lagrax", "lagrax / MJX",
          "lagrax / MuJoCo C"]  # fmt: skip


def markdown(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine():
    try:
        mjx_version = importlib.metadata.version("mujoco-mjx")
    except importlib.metadata.PackageNotFoundError:
        mjx_version = "not installed"
    emitters = "XLA's defaults" if "--xla-defaults" in sys.argv else "loop emitters"
    return (
        f"Machine: {cpu_name()}, {os.cpu_count()} CPUs (load average "
        f"{os.getloadavg()[0]:.1f} at the start), jax "
        f"{jax.__version__} on {jax.devices()}, mujoco {mujoco.__version__}, "
        f"mujoco-mjx {mjx_version}, lagrax {importlib.metadata.version('lagrax')}; "
        f"XLA:CPU {emitters}; float64 unless marked."
    )


# -- Main ------------------------------------------------------------------------------


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batches", default="256,4096")
    parser.add_argument(
        "--batch-steps", type=int, default=100, help="steps per member (<= --steps)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="hopper, 50 steps, batch 8, no w-p"
    )
    parser.add_argument("--skip-lagrax", action="store_true")
    parser.add_argument("--skip-mjx", action="store_true")
    parser.add_argument("--no-wp", action="store_true", help="no work-precision")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds for each model's lagrax process")  # fmt: skip
    parser.add_argument("--xla-defaults", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", choices=["lagrax", "mjx"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--float32", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.models, args.steps, args.batches, args.no_wp = "hopper", 50, "8", True
        args.repeats = min(args.repeats, 2)
    elif args.out is None and not args.worker:
        args.out = RESULTS / "robots.md"
    args.models = [s for s in args.models.split(",") if s]
    args.batches = [int(s) for s in args.batches.split(",") if s]
    args.batch_steps = min(args.batch_steps, args.steps)
    args.wp = not args.no_wp
    unknown = set(args.models) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {', '.join(MODELS)}")
    return args


def run_mjx(name, args):
    """MJX here in float64; where that fails, in float32 in a process of its own."""
    if args.skip_mjx:
        return Engine(failure="skipped"), []
    try:
        import_mjx()
    except ImportError as e:
        return Engine(failure=f"not installed ({e})"), []
    notes = []
    try:
        results = {}
        for key, value in mjx_engine(name, args):
            if key == "note":
                notes.append(f"{name}, MJX: {value}.")
            else:
                results[key] = value
                progress(f"  {name} MJX: {key} done")
        return Engine(results), notes
    except Exception as e:  # MJX in float64 fails: try float32, apart
        first = " ".join(str(e).split())[:300] or type(e).__name__
        progress(f"  {name} MJX float64 failed ({first}); float32 in a subprocess")
        results, failure = in_worker("mjx", name, args, args.timeout, ["--float32"])
        notes = [f"{name}, MJX: {note}." for note in results.pop("notes", [])]
        notes.append(
            f"{name}, MJX (f32): float32, in a process of its own: in float64 it "
            f"fails with `{type(e).__name__}: {first}`."
        )
        if failure:
            notes.append(f"{name}, MJX float32: failed: {failure}")
        return Engine(results, failure, " (f32)"), notes


def main():
    args = parse()
    if args.worker:
        return worker(args)
    header = machine()
    print(header)
    print()
    print(markdown(HEADER))
    print(markdown(["---"] * len(HEADER)), flush=True)
    rows, notes = [], []
    for name in args.models:
        m = load(name)
        progress(f"{name}: nq {m.nq}, nv {m.nv}, dt {m.opt.timestep:g} s")
        c = mujoco_c(name, args, args.wp)
        if "reference" in c:
            notes.append(f"{name}: the work-precision reference's error, estimated as "
                         f"|RK4(dt/{2**REFERENCE}) - RK4(dt/{2 ** (REFERENCE - 1)})| / "
                         f"15: {c['reference']['error']:.1e}.")  # fmt: skip
        mjx, mjx_notes = run_mjx(name, args)
        notes += mjx_notes
        if args.skip_lagrax:
            lx = Engine(failure="skipped")
        else:
            lx = Engine(*in_worker("lagrax", name, args, args.timeout))
            lx.results.pop("notes", None)
            if lx.failure:
                notes.append(f"{name}, lagrax: failed: {lx.failure}")
        model_rows, model_notes = rows_for(name, m, args, c, mjx, lx)
        for cells in model_rows:
            rows.append(cells)
            print(markdown(cells), flush=True)
        notes += model_notes
    for note in notes:
        print(f"- {note}")
    if args.out is not None:
        write(args, header, rows, notes)


def write(args, header, rows, notes):
    command = " ".join(["python benchmarks/robots.py", *sys.argv[1:]])
    lines = [
        "# lagrax against MuJoCo C and MJX on gymnasium's robots",
        "",
        f"Measured in one run of `{command}`. {header}",
        "",
        "gymnasium's models with contacts and joint limits disabled, no medium, zero "
        "controls, RK4 at the model's own timestep; initial states qpos0 with joint "
        f"velocities drawn from N(0, {SCALE}^2). MuJoCo C: `mujoco.rollout`, one "
        "thread. MJX: `jax.jit` of `jax.lax.scan` of `mjx.step` (`jax.vmap` for "
        "batches). lagrax: `jax.jit` of `lx.simulate` with classical RK4 at the same "
        "step and its default projection (`jax.vmap` for batches), each model in a "
        "process of its own. Warm times are medians of repeats. Ratios are of times "
        "(for throughput, of time per system-step): above 1, lagrax is slower. "
        "Work-precision: lagrax adaptive (default solver, rtol = atol in 1e-5 ... "
        "1e-12) and MuJoCo C RK4 at dt/2^k, errors against MuJoCo RK4 at "
        f"dt/{2**REFERENCE} Richardson-extrapolated.",
        "",
        markdown(HEADER),
        markdown(["---"] * len(HEADER)),
        *(markdown(cells) for cells in rows),
        "",
        *(f"- {note}" for note in notes),
        f"- Load average at the end: {os.getloadavg()[0]:.1f}.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
