"""The `lagrax` command: shipped configs, outputs, and refusals of bad input.

The configs run in-process at their full horizon (only the animation is cut to
a few frames), with the session's compilation cache (tests/conftest.py), so that
a config run again by another test is not compiled again; subprocesses check
the installed entry point end to end.
"""

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import jax
import numpy as np
import pytest

import lagrax as lx
from lagrax import cli

from .helpers import solve_reference


ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
FILES = ["trajectory.npz", "trajectory.csv", "summary.json", "positions.png",
         "velocities.png", "accelerations.png", "multipliers.png", "residuals.png",
         "energy.png", "animation.gif"]  # fmt: skip


def run_cli(*args):
    return cli.main([str(a) for a in args])


def _command() -> list[str]:
    """The installed `lagrax` console script (its entry point, if not on PATH)."""
    exe = Path(sys.executable).parent / "lagrax"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys, _lagrax_entry; "
            "sys.exit(_lagrax_entry.main())"]  # fmt: skip


def test_shipped_configs_exist():
    readme = (ROOT / "README.md").read_text()
    assert "python -m pip install -e . && lagrax run configs/slider_pendulum.toml" in (
        readme
    )
    assert {p.stem for p in CONFIGS} >= {"pendulum", "slider_pendulum",
                                         "double_pendulum"}  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_runs(config, tmp_path, capsys):
    """Every shipped config at its full horizon, as a user runs it (a shortened
    run hid a failure of the unstabilized drift study past its first chunk); only
    the animation is cut to a few frames."""
    out = tmp_path / "out"
    args = ["--set", "animation.frames=4", "--quiet"]
    assert run_cli("run", config, "--out", out, *args) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    raw = tomllib.loads(config.read_text())
    t1, points = raw["t1"], raw.get("save_points", 501)
    runs = summary["runs"]
    folders = [out] if len(runs) == 1 else [out / cli._config.slug(r["label"])
                                            for r in runs]  # fmt: skip
    for name in FILES[2:]:
        assert (out / name).stat().st_size > 0, name
    for folder, run in zip(folders, runs, strict=True):
        data = np.load(folder / "trajectory.npz")
        n, m = len(summary["coordinates"]), len(summary["constraints"])
        assert data["q"].shape == data["qdd"].shape == (points, n)
        assert data["multipliers"].shape == data["phi_dot"].shape == (points, m)
        np.testing.assert_allclose(data["ts"], np.linspace(0.0, t1, points))
        assert np.all(np.isfinite(data["q"]))
        assert run["max_abs_phi"] == pytest.approx(np.abs(data["phi"]).max())
        if run["stabilization"]["kind"] == "projection":
            assert run["max_abs_phi"] < 1e-10, run["label"]
        header = (folder / "trajectory.csv").read_text().splitlines()[0]
        assert header.split(",")[: n + 1] == ["t", *summary["coordinates"]]
        assert run["compile_s"] >= 0 and run["steps"] > 0
    # The singular mechanisms' own claims (their configs say so): energy kept
    # through singular configurations (n_four_bar) and with a redundant
    # constraint and slender bars (bricard).
    kept = {"n_four_bar": 1e-6, "bricard": 1e-8}.get(config.stem)
    if kept is not None:
        run = runs[0]
        assert run["energy_max_deviation"] <= kept * abs(run["energy_initial"])
    assert summary["versions"]["lagrax"]
    assert "->" in capsys.readouterr().out  # the one summary line


def test_compile_options_unknown_to_xla_fall_back_to_its_defaults(monkeypatch):
    lowered = jax.jit(lambda x: 2 * x).lower(1.0)
    assert float(cli._compile(lowered)(3.0)) == 6.0
    monkeypatch.setattr(cli, "_FAST_COMPILE_CPU", {"xla_cpu_no_such_option": True})
    assert float(cli._compile(lowered)(3.0)) == 6.0


def test_pendulum_against_minimal_coordinates(tmp_path):
    """The CLI's pendulum (its chunked integration included) against the angle
    equation th'' = -(g / l) sin th solved by scipy."""
    out = tmp_path / "out"
    assert run_cli("run", ROOT / "configs/pendulum.toml", "--out", out,
                   "--set", "t1=3.0", "--set", "solver.rtol=1e-10",
                   "--set", "solver.atol=1e-10", "--set", 'outputs=["npz"]',
                   "--quiet") == 0  # fmt: skip
    g, l = 9.81, 2.5
    for label in ("none_index-1", "Baumgarte_5_5", "projection"):
        data = np.load(out / label / "trajectory.npz")
        x, y = data["q"][0]
        th0 = np.arctan2(x, -y)  # angle from hanging straight down
        ref = solve_reference(
            lambda t, s: [s[1], -(g / l) * np.sin(s[0])], [th0, 0.0], data["ts"]
        )
        th = np.arctan2(data["q"][:, 0], -data["q"][:, 1])
        np.testing.assert_allclose(th, ref[:, 0], atol=1e-7, err_msg=label)
    summary = json.loads((out / "summary.json").read_text())
    projection = summary["runs"][2]
    assert projection["max_abs_phi"] < 1e-12
    assert abs(projection["energy_drift"]) < 1e-6
    assert not (out / "positions.png").exists()  # outputs = ["npz"] only


BAD = {
    "unknown key": ("foo = 1\n", "unknown key 'foo'"),
    "wrong type": ("[solver]\nrtol = 'tight'\n", "'solver.rtol': expected a number"),
    "unknown solver": ("[solver]\nname = 'rk99'\n", "dopri8"),
    "unknown stabilization": ("stabilization = 'magic'\n", "baumgarte"),
    "unknown param": ("[params]\nzeta = 1.0\n", "'params.zeta'"),
    "bad t1": ("", "'t1'"),
    "fixed step and tolerance": ("[solver]\ndt = 0.01\nrtol = 1e-6\n", "'solver.dt'"),
    "no error estimate": ("[solver]\nname = 'euler'\n", "give 'solver.dt'"),
    "rk4 without dt": ("[solver]\nname = 'rk4'\n", "give 'solver.dt'"),
    "bad coordinate": ("[initial]\nfixed_q = ['z']\n", "'initial.fixed_q'"),
    "short q": ("[initial]\nq = [1.0]\n", "'initial.q': expected 2 numbers"),
    "duplicate labels": ("[[runs]]\nlabel = 'a'\n[[runs]]\nlabel = 'a'\n", "twice"),
    "missing label": ("[[runs]]\n[[runs]]\n", "'runs[0].label'"),
    "bool as number": ("save_points = true\n", "'save_points'"),
    "labels on one folder": (
        "[[runs]]\nlabel = 'a b'\n[[runs]]\nlabel = 'a_b'\n",
        "both map to",
    ),
    "label on a file": (
        "[[runs]]\nlabel = 'a'\n[[runs]]\nlabel = 'Energy.png'\n",
        "output file",
    ),
    "undrawable title": ("title = '$x^$'\n", "matplotlib cannot draw"),
    "huge max_steps": (
        "[solver]\nmax_steps = 100000000000000000000\n",
        "between 1 and",
    ),
    "huge iterations": (
        "stabilization = {kind = 'projection', iterations = 1000000}\n",
        "between",
    ),
    # Strings are data, never code: only 'system = "module:factory"' imports.
    "code as a value": (
        "[params]\nm = \"__import__('os').getcwd()\"\n",
        "'params.m': expected a number",
    ),
}


def test_every_solver_name_gives_its_solver(tmp_path):
    """Each solver.name maps to its solver (diffrax's, or lagrax's RK4), fixed
    steps for those without an error estimate (the mapping only: the shipped
    configs run the CLI through)."""
    for name, (cls, adaptive) in cli._config.SOLVERS.items():
        step = {"rtol": 1e-6} if adaptive else {"dt": 0.01}
        raw = {"system": "pendulum", "t1": 1.0, "solver": {"name": name, **step}}
        run = cli._config.parse(raw, tmp_path / "p.toml").runs[0]
        solver = cli._strategies(run)[0]
        assert type(solver).__name__ == cls
        assert isinstance(solver, lx.RK4) == (name == "rk4")


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_config_is_refused(case, tmp_path, capsys):
    body, expected = BAD[case]
    t1 = "t1 = -1.0\n" if case == "bad t1" else "t1 = 1.0\n"
    config = tmp_path / "bad.toml"
    config.write_text(f'system = "pendulum"\n{t1}{body}')
    out = tmp_path / "out"
    assert run_cli("run", config, "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith("lagrax: error:") and expected in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.toml"]  # no temp folder


@pytest.mark.parametrize(
    "text, expected",
    [("t1 = [", "malformed TOML"), ('system = "nowhere"\nt1 = 1.0\n', "unknown system"),
     ('system = "no_such_module:make"\nt1 = 1.0\n', "cannot import module"),
     ("t1 = 1.0\n", "'system' is required")],
)  # fmt: skip
def test_bad_file_is_refused(text, expected, tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    assert run_cli("run", config, "--out", tmp_path / "out") == 2
    assert expected in capsys.readouterr().err
    assert run_cli("run", tmp_path / "missing.toml") == 2
    assert "no such config file" in capsys.readouterr().err


def test_output_folder_is_never_lost(tmp_path, capsys):
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.2\noutputs = ["npz"]\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert run_cli("run", config, "--out", out, "--quiet") == 2
    assert "--force" in capsys.readouterr().err
    # --force replaces only a folder that lagrax wrote.
    assert run_cli("run", config, "--out", out, "--quiet", "--force") == 2
    assert "not written by lagrax" in capsys.readouterr().err
    assert (out / "precious.txt").read_text() == "keep me"
    mine = tmp_path / "mine"
    assert run_cli("run", config, "--out", mine, "--quiet") == 0
    assert run_cli("run", config, "--out", mine, "--quiet") == 2
    assert "add --force" in capsys.readouterr().err
    # A failing run leaves the old folder as it was, even with --force.
    (mine / "note.txt").write_text("mine")
    args = ("--quiet", "--force", "--set", "solver.max_steps=2",
            "--set", "t1=5.0", "--set", "save_points=3")  # fmt: skip
    assert run_cli("run", config, "--out", mine, *args) == 1
    err = capsys.readouterr().err
    assert "max_steps" in err and "raise solver.max_steps" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert (mine / "note.txt").exists()
    assert run_cli("run", config, "--out", mine, "--quiet", "--force") == 0
    assert sorted(p.name for p in mine.iterdir()) == ["summary.json", "trajectory.npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "out", "p.toml"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert run_cli("run", config, "--out", blocker / "sub") == 2
    assert "cannot create" in capsys.readouterr().err


@pytest.mark.parametrize("out", [".", "", "..", "/"])
def test_output_that_is_no_new_folder_is_refused(out, tmp_path, monkeypatch, capsys):
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.2\n')
    monkeypatch.chdir(tmp_path)
    assert run_cli("run", config, "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith("lagrax: error: --out") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_a_folder_being_written_is_not_touched(tmp_path, capsys):
    """Two runs into one folder: the second is refused while the first holds
    the lock (here, the test holds it)."""
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.2\noutputs = ["npz"]\n')
    out = tmp_path / "out"
    with cli._output.locked(out):
        assert run_cli("run", config, "--out", out, "--force", "--quiet") == 2
    assert "being written by another lagrax run" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]  # no lock left


def test_a_failed_run_names_the_cause_and_the_keys_to_change(tmp_path, capsys):
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 1.0\noutputs = ["npz"]\n')
    # A massless bob: the mass matrix is singular from the start. Named at once.
    assert run_cli("run", config, "--out", tmp_path / "o", "--set", "params.m=0",
                   "--quiet") == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "(mass_matrix_not_positive_definite)" in err, err
    assert "check [params]" in err and 'saddle_solver = "dense_lu"' in err
    assert 'saddle_solver = "augmented_lagrangian"' in err
    assert "project_initial" not in err and "lx." not in err
    assert not (tmp_path / "o").exists()


def test_interrupt_writes_nothing(tmp_path, capsys):
    """Ctrl-C noted before the command got going (by the console script's early
    handler) stops it: exit 130, nothing written."""
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.2\n')
    status = cli.main(["run", str(config), "--out", str(tmp_path / "o")],
                      interrupted=[True])  # fmt: skip
    assert status == 130
    assert "interrupted; nothing written" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_interrupt_during_the_final_rename_undoes_it(tmp_path):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    (out / "old.txt").write_text("old")
    tmp.mkdir()
    (tmp / "new.txt").write_text("new")

    class PressedDuringRename(cli._output.Interrupts):
        def check(self):  # pressed after the last check, during the renames
            self.pressed.append(True)

    with pytest.raises(KeyboardInterrupt):
        cli._output.commit(tmp, out, True, PressedDuringRename())
    assert (out / "old.txt").read_text() == "old" and (tmp / "new.txt").exists()


def test_ctrl_c_in_a_real_process(tmp_path):
    """SIGINT to the installed command while it imports JAX: exit 130, nothing
    written, no traceback (Python's own handling could swallow it in a garbage
    collection callback and go on to write the results)."""
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.2\n')
    proc = subprocess.Popen([*_command(), "run", str(config), "--out", "o"],
                            cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "lagrax: interrupted; nothing written"
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


def test_custom_system_by_module_and_factory(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_rig.py").write_text(
        "import lagrax as lx\n"
        "def make():\n"
        "    m = lx.systems.pendulum()\n"
        "    return lx.systems.Model(**{**vars(m), 'name': 'my_rig'})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "rig.toml"
    config.write_text('system = "my_rig:make"\nt1 = 0.2\noutputs = ["npz"]\n'
                      "[params]\nl = 1.0\n")  # fmt: skip
    out = tmp_path / "out"
    assert run_cli("run", config, "--out", out, "--quiet") == 0
    q = np.load(out / "trajectory.npz")["q"]
    np.testing.assert_allclose(np.hypot(q[:, 0], q[:, 1]), 1.0, rtol=1e-10)
    assert json.loads((out / "summary.json").read_text())["system"] == "my_rig"


@pytest.mark.parametrize(
    "body, expected",
    [("raise SystemExit(3)", "raised SystemExit"), ("return 42", "not a "
     "lagrax.systems.Model"), ("raise ValueError('no rig')", "no rig")],
)  # fmt: skip
def test_factory_faults_are_config_errors(body, expected, tmp_path, monkeypatch,
                                          capsys):  # fmt: skip
    (tmp_path / "bad_rig.py").write_text(f"def make():\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bad_rig", raising=False)
    config = tmp_path / "rig.toml"
    config.write_text('system = "bad_rig:make"\nt1 = 0.2\n')
    assert run_cli("run", config, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_version_and_a_closed_pipe():
    proc = subprocess.run([*_command(), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("lagrax 0.")
    # `lagrax list | head -1`: the reader goes away early; no traceback.
    lister = subprocess.Popen([*_command(), "list"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
    lister.stdout.readline()
    lister.stdout.close()
    _, err = lister.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_list(capsys):
    assert run_cli("list") == 0
    out = capsys.readouterr().out
    for name in ("pendulum", "slider_pendulum", "double_pendulum"):
        assert f"{name}:" in out
    assert "k = 10" in out and "x1 [m]" in out


def test_console_script_help_and_errors(tmp_path):
    """The installed command: --help explains both commands; a bad config
    gives exit status 2 and one line, without a traceback."""
    command = _command()
    proc = subprocess.run([*command, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "lagrax run CONFIG.toml" in proc.stdout and "lagrax list" in proc.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('system = "pendulum"\nt1 = "soon"\n')
    proc = subprocess.run([*command, "run", str(bad)], capture_output=True,
                          text=True, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == "lagrax: error: key 't1': expected a number, got a string\n"
    assert not (tmp_path / "results").exists()


def test_second_run_reuses_the_compilation_cache(tmp_path):
    """A second run of a config compiles nothing new: every compiled program
    comes from the persistent cache, so the cache gains no entry. Every program
    is cached (no minimum compile time): with the default 0.2 s, one that
    compiles near it under load may be cached by the second run only."""
    env = {**os.environ, "LAGRAX_CACHE_DIR": str(tmp_path / "cache"),
           "LAGRAX_CACHE_MIN_COMPILE_S": "0"}  # fmt: skip
    config = tmp_path / "p.toml"
    config.write_text('system = "pendulum"\nt1 = 0.5\noutputs = ["npz"]\n')
    counts = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "lagrax", "run", str(config), "--force",
             "--quiet", "--out", str(tmp_path / "out")],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        counts.append(len(list((tmp_path / "cache").iterdir())))
    assert counts[0] > 0
    assert counts[1] == counts[0]


def test_singular_start_names_the_solvers_that_pass_it(tmp_path, capsys):
    """The N-four-bar starts flat. With the default solver the run stops at once
    and names the key to set; the key's every value gives its solver."""
    config = tmp_path / "p.toml"
    config.write_text('system = "n_four_bar"\nt1 = 2.0\noutputs = ["npz"]\n'
                      '[solver]\nrtol = 1e-10\natol = 1e-10\n')  # fmt: skip
    assert run_cli("run", config, "--out", tmp_path / "o", "--quiet") == 1
    err = capsys.readouterr().err
    assert 'saddle_solver = "singular_limit"' in err, err
    assert not (tmp_path / "o").exists()
    # The key names the solver that tests/test_singular.py runs through the
    # motion (here, only the mapping: the run would compile it once more).
    for name in cli._config.SADDLE_SOLVERS:
        raw = {"system": "n_four_bar", "t1": 2.0, "saddle_solver": name}
        run = cli._config.parse(raw, config).runs[0]
        saddle = cli._strategies(run)[2]
        expected = {"singular_limit": lx.SingularLimit,
                    "augmented_lagrangian": lx.AugmentedLagrangian,
                    "least_squares": lx.LeastSquares, "dense_lu": lx.DenseLU,
                    "schur_cholesky": lx.SchurCholesky}[name]  # fmt: skip
        assert type(saddle) is expected
