"""Run configurations for the `lagrax` command: a TOML file, checked before any work.

Reading and checking use only the standard library (and the system factory the
config names), so a bad config is refused in a fraction of a second, with one
line that names the key and the values allowed, before anything is computed or
written.

    system = "slider_pendulum"      # a built-in, or "package.module:factory"
    t1 = 10.0
    save_points = 501
    [params]                        # overrides of the system's defaults
    k = 12.0
    [solver]
    name = "dopri8"
    rtol = 1e-8
    [stabilization]
    kind = "baumgarte"
    alpha = 5.0
    beta = 5.0
    [[runs]]                        # optional: several runs, compared in the figures
    label = "projection"
    stabilization = "projection"
"""

import copy
import dataclasses
import importlib
import math
import re
import tomllib
from pathlib import Path
from typing import Any


SOLVERS = {
    # name: (diffrax class name, has an error estimate for adaptive steps)
    "euler": ("Euler", False),
    "rk4": ("RK4", False),  # lagrax's own (MuJoCo's mjINT_RK4); diffrax's others
    "heun": ("Heun", True),
    "midpoint": ("Midpoint", True),
    "ralston": ("Ralston", True),
    "bosh3": ("Bosh3", True),
    "tsit5": ("Tsit5", True),
    "dopri5": ("Dopri5", True),
    "dopri8": ("Dopri8", True),
    "kvaerno3": ("Kvaerno3", True),
    "kvaerno4": ("Kvaerno4", True),
    "kvaerno5": ("Kvaerno5", True),
}
STABILIZATIONS = ("none", "baumgarte", "projection")
SADDLE_SOLVERS = (
    "schur_cholesky", "dense_lu", "least_squares", "augmented_lagrangian",
    "singular_limit",
)  # fmt: skip
FIGURES = (
    "positions",
    "velocities",
    "accelerations",
    "multipliers",
    "residuals",
    "energy",
)
OUTPUTS = ("npz", "csv", *FIGURES, "animation")
OUTPUT_GROUPS = {"all": OUTPUTS, "data": ("npz", "csv"), "figures": FIGURES}


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and what to do."""


@dataclasses.dataclass(frozen=True)
class Stabilization:
    kind: str = "projection"
    alpha: float = 5.0
    beta: float = 5.0
    iterations: int = 3


@dataclasses.dataclass(frozen=True)
class Solver:
    name: str = "dopri8"
    rtol: float = 1e-8
    atol: float = 1e-8
    dt: float | None = None
    max_steps: int = 100_000


@dataclasses.dataclass(frozen=True)
class Run:
    """One simulation of the config: its label and everything that may differ."""

    label: str
    params: dict[str, float]
    solver: Solver
    stabilization: Stabilization
    saddle_solver: str


@dataclasses.dataclass(frozen=True)
class Animation:
    frames: int = 120
    fps: int = 24
    forces: bool = True


@dataclasses.dataclass(frozen=True)
class Config:
    """A checked config: every value has its type and lies in its allowed set."""

    path: Path
    model: Any
    title: str
    system: str
    t0: float
    t1: float
    save_points: int
    q0: tuple[float, ...] | None
    qd0: tuple[float, ...] | None
    fixed_q: tuple[int, ...] | None
    fixed_qd: tuple[int, ...] | None
    runs: tuple[Run, ...]
    outputs: tuple[str, ...]
    animation: Animation
    raw: dict[str, Any]


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML file at `path` as a dict; ConfigError if missing or malformed."""
    try:
        text = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a config file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.strerror})") from None
    try:
        return tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: malformed TOML: {e}") from None


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `key.sub=value` overrides (the value in TOML syntax) to a raw config."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set t1=2.0")
        try:
            parsed = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            # A bare word is a string: --set solver.name=tsit5.
            parsed = value.strip()
        table = raw
        *parents, leaf = key.split(".")
        for part in parents:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {item!r}: {part!r} is not a table")
        table[leaf] = parsed
    return raw


def load_model(reference: str):
    """The Model a config's `system` names: a built-in or "package.module:factory"."""
    from . import systems

    if ":" not in reference:
        if reference not in systems.BUILTIN:
            raise ConfigError(
                f"key 'system': unknown system {reference!r}; built-in systems are "
                f"{', '.join(sorted(systems.BUILTIN))}, or name your own as "
                '"package.module:factory"'
            )
        return systems.get(reference)
    module_name, _, attr = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(
            f"key 'system': cannot import module {module_name!r} ({e}); is it "
            "installed or on PYTHONPATH?"
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(
            f"key 'system': module {module_name!r} has no factory function {attr!r}"
        )
    try:
        model = factory()
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # SystemExit too: a factory must not end the run
        raise ConfigError(
            f"key 'system': {reference}() raised {type(e).__name__}: {e}"
        ) from None
    if not isinstance(model, systems.Model):
        raise ConfigError(
            f"key 'system': {reference} returned {type(model).__name__}, not a "
            "lagrax.systems.Model"
        )
    return model


class _Reader:
    """Takes keys out of one table, checking types; complains about leftovers."""

    def __init__(self, table: Any, where: str):
        if not isinstance(table, dict):
            raise ConfigError(f"key {where!r}: expected a table, got {_kind(table)}")
        self.table = dict(table)
        self.where = where

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def take(self, key, kind, default=..., *, choices=None, check=None, hint=""):
        if key not in self.table:
            if default is ...:
                raise ConfigError(f"key {self.name(key)!r} is required{hint}")
            return default
        value = self.table.pop(key)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        is_bool = isinstance(value, bool) and kind is not bool
        if is_bool or not isinstance(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            names = " or ".join(_TYPE_NAMES[k] for k in kinds)
            raise ConfigError(
                f"key {self.name(key)!r}: expected {names}, got {_kind(value)}"
            )
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"key {self.name(key)!r}: must be finite, got {value}")
        if choices is not None and value not in choices:
            raise ConfigError(
                f"key {self.name(key)!r}: unknown value {value!r}; allowed: "
                f"{', '.join(choices)}"
            )
        if check is not None:
            problem = check(value)
            if problem:
                raise ConfigError(f"key {self.name(key)!r}: {problem}")
        return value

    def done(self, allowed: tuple[str, ...]):
        for key in self.table:
            raise ConfigError(
                f"unknown key {self.name(key)!r}; allowed here: {', '.join(allowed)}"
            )


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number",
               str: "a string", list: "an array", dict: "a table"}  # fmt: skip


def _kind(value) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _positive(value):
    return None if value > 0 else f"must be > 0, got {value}"


def _between(low: int, high: int):
    def check(value):
        if low <= value <= high:
            return None
        return f"must be between {low} and {high}, got {value}"

    return check


TOP_KEYS = ("title", "system", "t0", "t1", "save_points", "params", "initial",
            "solver", "stabilization", "saddle_solver", "outputs", "animation",
            "runs")  # fmt: skip
RUN_KEYS = ("label", "params", "solver", "stabilization", "saddle_solver")
SOLVER_KEYS = ("name", "rtol", "atol", "dt", "max_steps")
STABILIZATION_KEYS = ("kind", "alpha", "beta", "iterations")


def parse(raw: dict[str, Any], path: Path) -> Config:
    """Check a raw config (a dict from TOML) and return it as a Config.

    Loads the Model that `system` names, to check parameter and coordinate names
    against it.
    """
    top = _Reader(raw, "")
    title = top.take("title", str, "")
    system = top.take(
        "system", str, hint=': a built-in name (see "lagrax list") or '
        '"package.module:factory"'
    )  # fmt: skip
    model = load_model(system)
    t0 = top.take("t0", float, 0.0)
    t1 = top.take("t1", float, check=lambda v: None if v > t0 else
                  f"must be later than t0 = {t0}, got {v}")  # fmt: skip
    save_points = top.take("save_points", int, 501, check=_between(2, 10**6))
    base_params = _params(top.take("params", dict, {}), "params", model)
    q0, qd0, fixed_q, fixed_qd = _initial(top.take("initial", dict, {}), model)
    base_solver = top.take("solver", dict, {})
    base_stab = top.take("stabilization", (str, dict), "projection")
    base_saddle = top.take("saddle_solver", str, "schur_cholesky",
                           choices=SADDLE_SOLVERS)  # fmt: skip
    outputs = _outputs(top.take("outputs", list, ["all"]))
    animation = _animation(top.take("animation", dict, {}))
    raw_runs = top.take("runs", list, [{}])
    top.done(TOP_KEYS)
    if not raw_runs:
        raise ConfigError("key 'runs': give at least one [[runs]] table, or none")

    runs = []
    for i, raw_run in enumerate(raw_runs):
        where = f"runs[{i}]"
        r = _Reader(raw_run, where)
        default_label = model.name if len(raw_runs) == 1 else None
        label = r.take("label", str, default_label,
                       hint=" when there are several runs")  # fmt: skip
        if label is None:
            raise ConfigError(f"key '{where}.label' is required when there are "
                              "several runs")  # fmt: skip
        params = dict(base_params)
        params.update(_params(r.take("params", dict, {}), f"{where}.params", model))
        solver_table = dict(base_solver)
        solver_table.update(r.take("solver", dict, {}))
        solver = _solver(solver_table, "solver" if "solver" not in raw_run else
                         f"{where}.solver")  # fmt: skip
        stab = _stabilization(
            r.take("stabilization", (str, dict), base_stab),
            "stabilization" if "stabilization" not in raw_run
            else f"{where}.stabilization",
        )  # fmt: skip
        saddle = r.take("saddle_solver", str, base_saddle, choices=SADDLE_SOLVERS)
        r.done(RUN_KEYS)
        runs.append(Run(label, params, solver, stab, saddle))
    labels = [run.label for run in runs]
    for label in labels:
        if labels.count(label) > 1:
            raise ConfigError(f"key 'runs': label {label!r} is used twice; labels "
                              "must differ")  # fmt: skip
    if len(runs) > 1:
        _check_folders(labels)
    return Config(path, model, title, system, t0, t1, save_points, q0, qd0, fixed_q,
                  fixed_qd, tuple(runs), outputs, animation, raw)  # fmt: skip


def _params(table, where, model) -> dict[str, float]:
    r = _Reader(table, where)
    out = {}
    for key in list(r.table):
        if key not in model.params:
            raise ConfigError(
                f"unknown key '{where}.{key}': {model.name} has the parameters "
                f"{', '.join(model.params)}"
            )
        out[key] = r.take(key, float)
    return out


def _initial(table, model):
    r = _Reader(table, "initial")
    n = len(model.coordinates)

    def vector(key):
        value = r.take(key, list, None)
        if value is None:
            return None
        if len(value) != n or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(
                f"key 'initial.{key}': expected {n} numbers (one per coordinate "
                f"{', '.join(model.coordinates)}), got {value!r}"
            )
        return tuple(float(v) for v in value)

    def indices(key):
        value = r.take(key, list, None)
        if value is None:
            return None
        out = []
        for v in value:
            if isinstance(v, str) and v in model.coordinates:
                out.append(model.coordinates.index(v))
            elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n:
                out.append(v)
            else:
                raise ConfigError(
                    f"key 'initial.{key}': {v!r} is not a coordinate; allowed: "
                    f"{', '.join(model.coordinates)} (or indices 0..{n - 1})"
                )
        return tuple(out)

    q0, qd0 = vector("q"), vector("qd")
    fixed_q, fixed_qd = indices("fixed_q"), indices("fixed_qd")
    r.done(("q", "qd", "fixed_q", "fixed_qd"))
    return q0, qd0, fixed_q, fixed_qd


def _solver(table, where) -> Solver:
    r = _Reader(table, where)
    name = r.take("name", str, "dopri8", choices=tuple(SOLVERS))
    dt = r.take("dt", float, None, check=_positive)
    has_tolerances = "rtol" in r.table or "atol" in r.table
    rtol = r.take("rtol", float, 1e-8, check=_positive)
    atol = r.take("atol", float, 1e-8, check=_positive)
    max_steps = r.take("max_steps", int, 100_000, check=_between(1, 10**9))
    r.done(SOLVER_KEYS)
    if dt is not None and has_tolerances:
        raise ConfigError(
            f"keys '{where}.dt' and '{where}.rtol'/'atol' exclude each other: give "
            "dt for fixed steps or rtol/atol for adaptive ones"
        )
    if dt is None and not SOLVERS[name][1]:
        raise ConfigError(
            f"key '{where}.name': solver {name!r} has no error estimate for "
            f"adaptive steps; give '{where}.dt' for fixed steps"
        )
    return Solver(name, rtol, atol, dt, max_steps)


def _stabilization(value, where) -> Stabilization:
    if isinstance(value, str):
        value = {"kind": value}
    r = _Reader(value, where)
    kind = r.take("kind", str, choices=STABILIZATIONS)
    if kind == "baumgarte":
        alpha = r.take("alpha", float, 5.0, check=_nonnegative)
        beta = r.take("beta", float, 5.0, check=_nonnegative)
        r.done(("kind", "alpha", "beta"))
        return Stabilization(kind, alpha=alpha, beta=beta)
    if kind == "projection":
        iterations = r.take("iterations", int, 3, check=_between(1, 100))
        r.done(("kind", "iterations"))
        return Stabilization(kind, iterations=iterations)
    r.done(("kind",))
    return Stabilization(kind)


def _nonnegative(value):
    return None if value >= 0 else f"must be >= 0, got {value}"


def _outputs(value) -> tuple[str, ...]:
    allowed = (*OUTPUT_GROUPS, *OUTPUTS)
    out = []
    for item in value:
        if item not in allowed:
            raise ConfigError(
                f"key 'outputs': unknown output {item!r}; allowed: {', '.join(allowed)}"
            )
        for name in OUTPUT_GROUPS.get(item, (item,)):
            if name not in out:
                out.append(name)
    return tuple(out)


def _animation(table) -> Animation:
    r = _Reader(table, "animation")
    frames = r.take("frames", int, 120, check=_between(2, 2000))
    fps = r.take("fps", int, 24, check=_between(1, 60))
    forces = r.take("forces", bool, True)
    r.done(("frames", "fps", "forces"))
    return Animation(frames, fps, forces)


# The files of the output folder itself; a run's subfolder must not take a name.
TOP_FILES = ("summary.json", "animation.gif", *(f"{f}.png" for f in FIGURES))


def _check_folders(labels) -> None:
    """Each run gets a subfolder named after its label: refuse labels that map to
    the same folder (also where case is ignored) or to a file of the output."""
    seen = {}
    for label in labels:
        folder = slug(label)
        key = folder.casefold()
        if key in seen:
            raise ConfigError(
                f"key 'runs': labels {seen[key]!r} and {label!r} both map to the "
                f"folder {folder!r}; make them differ in letters or digits"
            )
        if key in (name.casefold() for name in TOP_FILES):
            raise ConfigError(
                f"key 'runs': label {label!r} maps to the folder {folder!r}, which "
                "is the name of an output file; choose another label"
            )
        seen[key] = label


def slug(label: str) -> str:
    """A folder name for a run label."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_.") or "run"
