"""The `lagrax` command: run a TOML config, write data, figures and an animation.

    lagrax run configs/slider_pendulum.toml [--out DIR] [--force] [--set t1=2]
    lagrax list

Exit status: 0 on success, 2 for a config or command-line problem (one line on
stderr, nothing written), 1 when a simulation fails (nothing written either).
"""

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from . import _config, _output, systems
from ._errors import checks_as_nan
from ._saddle import AugmentedLagrangian, DenseLU, LeastSquares, SchurCholesky
from ._simulate import simulate
from ._singular import SingularLimit
from ._solvers import RK4
from ._stabilization import Baumgarte, NoStabilization, Projection


EPILOG = """\
commands:
  lagrax run CONFIG.toml   simulate what the config describes and write
                           trajectory.npz/.csv, summary.json, figures and
                           animation.gif into a new folder (default:
                           results/<config name>/); see configs/ for examples
  lagrax list              the built-in systems, their coordinates, constraints
                           and parameters with defaults

Float64 is on. Compiled code is cached in $LAGRAX_CACHE_DIR (default
~/.cache/lagrax/jax), so a second run of a config does not compile again.
"""


# The Trajectory fields the command saves, in this order.
FIELDS = ("ts", "q", "qd", "qdd", "multipliers", "phi", "phi_dot", "energy")


class RunError(RuntimeError):
    """A simulation that failed; the message says where and what to do."""


def main(argv: list[str] | None = None, interrupted: list | None = None) -> int:
    """The `lagrax` command; returns its exit status.

    `interrupted`: a list to which a SIGINT handler installed before lagrax was
    imported appended for each Ctrl-C (the console script's, see
    `_lagrax_entry`); one entry means stop.
    """
    try:
        with _output.interrupts(interrupted) as state:
            state.check()
            parser = _parser()
            args = parser.parse_args(argv)
            if args.command is None:
                parser.print_help()
                return 2
            if args.command == "list":
                return _list()
            return _run(args, state)
    except _config.ConfigError as e:
        print(f"lagrax: error: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"lagrax: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lagrax: interrupted; nothing written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `lagrax list | head`: the reader left; so do we, quietly. Python would
        # report the failed flush of stdout at exit: point it at /dev/null.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lagrax",
        description="Simulate constrained mechanical systems from TOML configs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--version", action="version", version=f"lagrax {_version()}",
        help="print the version of lagrax and exit",
    )  # fmt: skip
    sub = p.add_subparsers(dest="command", metavar="{run,list}")
    run = sub.add_parser(
        "run",
        help="run a TOML config",
        description="Run a TOML config and write its results into a new folder.",
    )
    run.add_argument("config", type=Path, help="the TOML config file")
    run.add_argument(
        "--out", type=Path, help="output folder (default: results/<config name>)"
    )
    run.add_argument(
        "--force", action="store_true", help="replace an existing output folder"
    )
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set t1=2.0 --set solver.rtol=1e-6 "
        "(repeatable; VALUE in TOML syntax)",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="do not use the compilation cache"
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("list", help="list the built-in systems")
    return p


def _version() -> str:
    try:
        return importlib.metadata.version("lagrax")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _list() -> int:

    for name in systems.BUILTIN:
        model = systems.get(name)
        print(f"{name}: {model.description}")
        coords = ", ".join(
            f"{c} [{u}]" for c, u in zip(model.coordinates, model.units, strict=True)
        )
        print(f"  coordinates: {coords}")
        print(f"  constraints: {', '.join(model.constraint_names)}")
        params = ", ".join(f"{k} = {v:g}" for k, v in model.params.items())
        print(f"  params: {params}")
    return 0


# ----------------------------------------------------------------------------
# lagrax run


def _run(args, state: _output.Interrupts) -> int:
    raw = _config.read_toml(args.config)
    raw = _config.apply_overrides(raw, args.overrides)
    config = _config.parse(raw, args.config)
    _check_texts(config)
    model = config.model
    out = args.out if args.out is not None else Path("results") / args.config.stem
    _output.check_out(out, args.force)

    started = time.perf_counter()
    with _output.locked(out):
        _output.probe_rename(out)
        tmp = _output.make_temporary(out)
        try:
            with _runtime(cache=not args.no_cache):
                results = {}
                for run in config.runs:
                    results[run.label] = _simulate(
                        model, config, run, args.quiet, state
                    )
            _write(model, config, results, tmp, state)
            _output.commit(tmp, out, args.force, state)
        finally:
            _output.remove(tmp)
    _report(model, config, results, out, time.perf_counter() - started)
    return 0


def _check_texts(config: _config.Config) -> None:
    """Refuse a title or run label that matplotlib cannot draw, before the run."""
    for key, text in [("title", config.title)] + [
        (f"runs[{i}].label", run.label) for i, run in enumerate(config.runs)
    ]:
        problem = _text_problem(text)
        if problem:
            raise _config.ConfigError(
                f"key {key!r}: matplotlib cannot draw {text!r}: the math between $ "
                f"signs does not parse near {problem!r}; fix it, or write a literal "
                "$ as \\$"
            )


def _text_problem(text: str) -> str | None:
    """Why matplotlib cannot draw `text` (bad math between $ signs), or None."""
    if "$" not in text:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure()
    FigureCanvasAgg(figure)
    figure.suptitle(text)
    try:
        figure.canvas.draw()
    except Exception as e:  # matplotlib raises ValueError and others
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None


def cache_dir() -> Path:
    """Where the CLI keeps JAX's persistent compilation cache."""
    if "LAGRAX_CACHE_DIR" in os.environ:
        return Path(os.environ["LAGRAX_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lagrax" / "jax"


@contextlib.contextmanager
def _runtime(cache: bool):
    """Float64, the persistent compilation cache, and runtime checks as NaN.

    The CLI reads each solve's result code instead of raising inside compiled
    code, and XLA's cache refuses programs that hold host callbacks, which
    equinox's raising checks are: they return NaN instead while the CLI runs
    (`checks_as_nan`).
    """

    jax.config.update("jax_enable_x64", True)
    if cache:
        jax.config.update("jax_compilation_cache_dir", str(cache_dir()))
        # Programs that compile faster than this are not worth a file. The
        # environment may lower it (the tests set 0: every program cached, so
        # that a second run provably compiles nothing, whatever the load).
        least = float(os.environ.get("LAGRAX_CACHE_MIN_COMPILE_S", 0.2))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", least)
    with checks_as_nan():
        yield


def _strategies(run: _config.Run):

    name = _config.SOLVERS[run.solver.name][0]
    solver = RK4() if name == "RK4" else getattr(dfx, name)()
    stab = run.stabilization
    stabilization = {
        "none": lambda: NoStabilization(),
        "baumgarte": lambda: Baumgarte(stab.alpha, stab.beta),
        "projection": lambda: Projection(iterations=stab.iterations),
    }[stab.kind]()
    saddle = {
        "schur_cholesky": SchurCholesky,
        "dense_lu": DenseLU,
        "least_squares": LeastSquares,
        "augmented_lagrangian": AugmentedLagrangian,
        "singular_limit": SingularLimit,
    }[run.saddle_solver]()
    return solver, stabilization, saddle


def _initial_state(model, config, params):
    try:
        return model.initial_state(
            params, config.t0, q=config.q0, qd=config.qd0, fixed_q=config.fixed_q,
            fixed_qd=config.fixed_qd,
        )  # fmt: skip
    except ValueError as e:
        raise _config.ConfigError(
            f"key 'initial': no consistent initial state near the one given ({e}); "
            "change initial.q or the coordinates in initial.fixed_q"
        ) from None


def _chunks(config: _config.Config, pieces: int = 40):
    """Save times split into equal chunks (the last padded with t1).

    The run integrates chunk by chunk with one compiled function, so the progress
    bar moves between chunks and no host callback enters the compiled code.
    """

    n = config.save_points
    ts = np.linspace(config.t0, config.t1, n)
    per = math.ceil((n - 1) / min(pieces, n - 1))
    chunks = []
    for start in range(0, n - 1, per):
        idx = np.arange(start, start + per + 1)
        chunks.append((ts[np.minimum(idx, n - 1)], int(min(idx[-1], n - 1) - start)))
    return ts, chunks


def _simulate(model, config, run: _config.Run, quiet: bool, state) -> dict:
    """Integrate one run; NumPy arrays of every Trajectory field and the timings."""

    params = {k: jnp.asarray(v, dtype=float) for k, v in model.params.items()}
    params.update({k: jnp.asarray(v, dtype=float) for k, v in run.params.items()})
    setup = time.perf_counter()
    q, qd = _initial_state(model, config, params)
    setup = time.perf_counter() - setup
    solver, stabilization, saddle = _strategies(run)
    if run.solver.dt is None:
        steps = dict(rtol=run.solver.rtol, atol=run.solver.atol)
    else:
        steps = dict(stepsize_controller=dfx.ConstantStepSize(), dt0=run.solver.dt)

    def chunk(ts, q, qd, params, initial_tol):
        return simulate(
            model.system, q, qd, params, t0=ts[0], t1=ts[-1], ts=ts, solver=solver,
            stabilization=stabilization, saddle_solver=saddle,
            max_steps=run.solver.max_steps, throw=False, initial_tol=initial_tol,
            **steps,
        )  # fmt: skip

    ts, chunks = _chunks(config)
    first = jnp.asarray(chunks[0][0])
    # The start is checked once; every later chunk continues the same run from
    # where the last one stopped, whatever the drift by then (the study of an
    # unstabilized run is the point of some configs), so its check is off.
    check, carry_on = jnp.asarray(np.finfo(float).eps ** 0.5), jnp.asarray(np.inf)
    state.check()
    compile_time = time.perf_counter()
    compiled = _compile(jax.jit(chunk).lower(first, q, qd, params, check))
    compile_time = time.perf_counter() - compile_time
    state.check()

    pieces = []
    counts = {"num_steps": 0, "num_accepted_steps": 0, "num_rejected_steps": 0}
    bar = tqdm(
        total=float(config.t1 - config.t0), disable=quiet, unit="s", leave=False,
        desc=run.label, bar_format="{desc}: {percentage:3.0f}%|{bar}| t = {n:.3g} / "
        "{total:.3g} s [{elapsed}<{remaining}]",
    )  # fmt: skip
    wall = time.perf_counter()
    with bar:
        for chunk_ts, used in chunks:
            tol = check if not pieces else carry_on
            sol = compiled(jnp.asarray(chunk_ts), q, qd, params, tol)
            sol = jax.tree.map(np.asarray, sol)
            state.check()
            for key in counts:
                counts[key] += int(sol.stats[key])
            if sol.failed:
                raise RunError(_failure(run, config, sol, chunk_ts))
            keep = slice(0 if not pieces else 1, used + 1)
            pieces.append({f: getattr(sol, f)[keep] for f in FIELDS})
            q, qd = jnp.asarray(sol.q[used]), jnp.asarray(sol.qd[used])
            bar.update(float(chunk_ts[used] - chunk_ts[0]))
    wall = time.perf_counter() - wall
    data = {f: np.concatenate([p[f] for p in pieces]) for f in pieces[0]}
    data["ts"] = ts  # the exact save times, free of chunk round-off
    data.update(counts)
    data.update(setup_s=setup, compile_s=compile_time, wall_s=wall, params=params)
    return data


# What to change in the config, by the name of the result a run failed with.
_FIXES = {
    "max_steps": "raise solver.max_steps (now {max_steps}, for each 1/40 of the run), "
    "or loosen solver.rtol and solver.atol; a stiff system may need "
    'solver.name = "kvaerno5"',
    "step_size_collapsed": "the equations of motion cannot be continued past this "
    "state (they turn NaN or singular just beyond it, or the forces jump there): "
    "check [params] and [initial], and the model near this state",
    "nonfinite_step": "a fixed step gave NaN or inf: lower solver.dt (now {dt}), or "
    "use adaptive steps (solver.rtol and solver.atol instead of solver.dt)",
    "nonfinite_terms": "the equations of motion gave NaN or inf here: check [params] "
    "(a zero length, mass or inertia that the model divides by) and [initial]",
    "mass_matrix_not_positive_definite": "the mass matrix is singular or "
    "indefinite: a body without mass or inertia? check [params]; if the model is "
    'singular by design, set saddle_solver = "augmented_lagrangian" (or '
    'saddle_solver = "dense_lu")',
    "redundant_constraints": "the constraints are dependent (redundant): set "
    'saddle_solver = "least_squares"; if they are so only at this configuration '
    '(a singular start), saddle_solver = "singular_limit"',
    "singular_saddle_matrix": "the constraints are dependent, or the mass matrix is "
    'singular where they allow motion: set saddle_solver = "least_squares"',
    "singular_configuration": "the mechanism reached a singular configuration "
    "(links aligned, a dead point) where its constraints lose rank: set "
    'saddle_solver = "singular_limit" or "augmented_lagrangian" to pass through '
    "it, or change [params] "
    "or [initial] so that the motion avoids it",
    "nonfinite_inputs": "NaN or inf in the parameters or the initial state: check "
    "[params] and [initial]",
    "inconsistent_initial_state": "the initial state does not satisfy the "
    "constraints: change initial.q and initial.qd, or the coordinates kept in "
    "initial.fixed_q and initial.fixed_qd",
    "initial_projection_failed": "no consistent state near initial.q: change "
    "initial.q, or the coordinates kept in initial.fixed_q",
    "velocity_constraints_not_affine": "the model's velocity constraints are not "
    "affine in the velocities: a fault in the model's code, not in the config",
    "invalid_arguments": "check t0, t1, save_points and solver.dt",
}


def _failure(run: _config.Run, config: _config.Config, sol, chunk_ts) -> str:
    """One line: which run failed, where, why, and which config keys to change."""
    name = str(sol.status)
    reached = np.asarray(sol.ts)[np.isfinite(sol.ts)]
    where = f"after t = {reached[-1]:.6g} s" if reached.size else (
        f"at t = {chunk_ts[0]:.6g} s"
    )  # fmt: skip
    fix = _FIXES.get(name, "see the message above").format(
        max_steps=run.solver.max_steps, dt=run.solver.dt
    )
    return f"run {run.label!r} failed {where} ({name}): {fix}"


# XLA:CPU's loop emitters compile lagrax's programs 1.6x faster than its default
# fusion emitters (1.1-1.9x per built-in system), into code that runs as fast
# (benchmarks/compile_time.py). An XLA without the option compiles with its
# defaults.
_FAST_COMPILE_CPU = {"xla_cpu_use_fusion_emitters": False}


def _compile(lowered):
    """`lowered.compile()`, with the faster-compiling options on a CPU."""
    if jax.default_backend() == "cpu":
        try:
            return lowered.compile(_FAST_COMPILE_CPU)
        except Exception as e:  # jax's runtime error type moved between versions
            if "compile option" not in str(e):
                raise
    return lowered.compile()


def _frames(model, data, animation: _config.Animation) -> dict:
    """Mechanism points (and constraint forces) at evenly spaced frames."""

    idx = np.unique(np.linspace(0, len(data["ts"]) - 1, animation.frames).round())
    idx = idx.astype(int)
    ts, q, lam = data["ts"][idx], data["q"][idx], data["multipliers"][idx]
    params = data["params"]
    # Jitted: one program per call, not one per operation of the model's points.
    points = jax.jit(jax.vmap(model.points, (0, 0, None)))
    every = max(1, len(data["ts"]) // 5000)
    trail_ts, trail_q = data["ts"][::every], data["q"][::every]
    frames = {
        "frame_ts": ts,
        "points": np.asarray(points(ts, q, params)),
        "trail_ts": trail_ts,
        "trail": np.asarray(points(trail_ts, trail_q, params))[:, -1],
    }
    if animation.forces and model.constraint_forces is not None:
        forces_at = jax.jit(jax.vmap(model.constraint_forces, (0, 0, 0, None)))
        where, forces = forces_at(ts, q, lam, params)
        frames.update(force_points=np.asarray(where), forces=np.asarray(forces))
    return frames


def _write(model, config, results: dict, folder: Path, state) -> None:
    """Every output of the config into `folder`; Ctrl-C stops it between files."""
    from . import _plot

    title = config.title or model.name
    several = len(results) > 1
    for label, data in results.items():
        run_folder = folder / _config.slug(label) if several else folder
        run_folder.mkdir(exist_ok=True)
        if "npz" in config.outputs:
            np.savez(
                run_folder / "trajectory.npz",
                **{k: data[k] for k in FIELDS},
                coordinates=np.array(model.coordinates),
                units=np.array(model.units),
                constraint_names=np.array(model.constraint_names),
            )
        if "csv" in config.outputs:
            _write_csv(model, data, run_folder / "trajectory.csv")
        state.check()
    for kind in ("positions", "velocities", "accelerations"):
        if kind in config.outputs:
            _plot.coordinates(model, results, kind, folder / f"{kind}.png", title)
            state.check()
    if "multipliers" in config.outputs and model.constraint_names:
        _plot.multipliers(model, results, folder / "multipliers.png", title)
    if "residuals" in config.outputs and model.constraint_names:
        _plot.residuals(model, results, folder / "residuals.png", title)
    if "energy" in config.outputs:
        _plot.energy(model, results, folder / "energy.png", title)
    state.check()
    if "animation" in config.outputs and model.points is not None:
        frames = {
            label: _frames(model, data, config.animation)
            for label, data in results.items()
        }
        state.check()
        _plot.animate(
            model, frames, folder / "animation.gif", title, config.animation.fps
        )
    summary = _summary(model, config, results)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def _write_csv(model, data, path: Path) -> None:

    names = ["t"]
    names += list(model.coordinates)
    names += [f"{c}_dot" for c in model.coordinates]
    names += [f"{c}_ddot" for c in model.coordinates]
    for kind in ("lambda", "phi", "phi_dot"):
        names += [f"{kind}[{c}]" for c in model.constraint_names]
    names.append("energy")
    table = np.column_stack(
        [data["ts"], data["q"], data["qd"], data["qdd"], data["multipliers"],
         data["phi"], data["phi_dot"], data["energy"]]
    )  # fmt: skip
    np.savetxt(path, table, delimiter=",", header=",".join(names), comments="",
               fmt="%.17g")  # fmt: skip


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("lagrax", "jax", "jaxlib", "diffrax", "equinox", "lineax", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _run_summary(model, run: _config.Run, data: dict) -> dict:

    e = data["energy"]
    return {
        "label": run.label,
        "params": {k: float(v) for k, v in data["params"].items()},
        "solver": vars(run.solver),
        "stabilization": vars(run.stabilization),
        "saddle_solver": run.saddle_solver,
        "max_abs_phi": float(np.abs(data["phi"]).max(initial=0.0)),
        "max_abs_phi_dot": float(np.abs(data["phi_dot"]).max(initial=0.0)),
        "energy_initial": float(e[0]),
        # E(t1) - E(t0): numerical drift where the model conserves energy, the
        # work of its forces and drives where it does not (`conservative`).
        "energy_drift": float(e[-1] - e[0]),
        "conservative": model.is_conservative(data["params"]),
        "energy_max_deviation": float(np.abs(e - e[0]).max()),
        "steps": data["num_steps"],
        "accepted_steps": data["num_accepted_steps"],
        "rejected_steps": data["num_rejected_steps"],
        "initial_state_s": round(data["setup_s"], 4),
        "compile_s": round(data["compile_s"], 4),
        "wall_s": round(data["wall_s"], 4),
    }


def _energy_words(model, data) -> str:
    """What E(t1) - E(t0) is: numerical drift, or the work of forces and drives."""
    return "energy drift" if model.is_conservative(data["params"]) else "work done"


def _summary(model, config, results: dict) -> dict:
    return {
        "config": str(config.path),
        "config_echo": config.raw,
        "system": model.name,
        "description": model.description,
        "coordinates": list(model.coordinates),
        "units": list(model.units),
        "constraints": list(model.constraint_names),
        "t0": config.t0,
        "t1": config.t1,
        "save_points": config.save_points,
        "versions": _versions(),
        "runs": [_run_summary(model, run, results[run.label]) for run in config.runs],
    }


def _report(model, config, results, out: Path, total: float) -> None:

    parts = []
    for label, data in results.items():
        name = f"{label}: " if len(results) > 1 else ""
        parts.append(
            f"{name}max|phi| {np.abs(data['phi']).max(initial=0.0):.1e}, "
            f"{_energy_words(model, data)} "
            f"{data['energy'][-1] - data['energy'][0]:+.1e} J, "
            f"{data['num_steps']} steps, compile {data['compile_s']:.1f} s, "
            f"run {data['wall_s']:.2f} s"
        )
    print(
        f"{model.name}, t = {config.t0:g}..{config.t1:g} s | " + " | ".join(parts)
        + f" | {total:.1f} s in all -> {out}/"
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
