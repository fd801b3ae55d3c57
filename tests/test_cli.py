"""The `lagrax` command: shipped configs, outputs, and refusals of bad input.

The configs run in-process (one JAX runtime, no compilation cache) on a short
horizon; one subprocess checks the installed entry point end to end.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lagrax import cli

from .helpers import solve_reference


ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
SHORT = ["--set", "save_points=41", "--set", "animation.frames=4", "--no-cache",
         "--quiet"]  # fmt: skip
FILES = ["trajectory.npz", "trajectory.csv", "summary.json", "positions.png",
         "velocities.png", "accelerations.png", "multipliers.png", "residuals.png",
         "energy.png", "animation.gif"]  # fmt: skip


def run_cli(*args):
    return cli.main([str(a) for a in args])


def test_shipped_configs_exist():
    readme = (ROOT / "README.md").read_text()
    assert "python -m pip install -e . && lagrax run configs/slider_pendulum.toml" in (
        readme
    )
    assert {p.stem for p in CONFIGS} >= {"pendulum", "slider_pendulum",
                                         "double_pendulum"}  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_runs(config, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_cli("run", config, "--out", out, "--set", "t1=0.5", *SHORT) == 0
    summary = json.loads((out / "summary.json").read_text())
    runs = summary["runs"]
    folders = [out] if len(runs) == 1 else [out / cli._config.slug(r["label"])
                                            for r in runs]  # fmt: skip
    for name in FILES[2:]:
        assert (out / name).stat().st_size > 0, name
    for folder, run in zip(folders, runs, strict=True):
        data = np.load(folder / "trajectory.npz")
        n, m = len(summary["coordinates"]), len(summary["constraints"])
        assert data["q"].shape == data["qdd"].shape == (41, n)
        assert data["multipliers"].shape == data["phi_dot"].shape == (41, m)
        np.testing.assert_allclose(data["ts"], np.linspace(0.0, 0.5, 41))
        assert np.all(np.isfinite(data["q"]))
        assert run["max_abs_phi"] == pytest.approx(np.abs(data["phi"]).max())
        header = (folder / "trajectory.csv").read_text().splitlines()[0]
        assert header.split(",")[: n + 1] == ["t", *summary["coordinates"]]
        assert run["compile_s"] >= 0 and run["steps"] > 0
    assert summary["versions"]["lagrax"]
    assert summary["config_echo"]["t1"] == 0.5
    assert "->" in capsys.readouterr().out  # the one summary line


def test_pendulum_against_minimal_coordinates(tmp_path):
    """The CLI's pendulum (its chunked integration included) against the angle
    equation th'' = -(g / l) sin th solved by scipy."""
    out = tmp_path / "out"
    assert run_cli("run", ROOT / "configs/pendulum.toml", "--out", out,
                   "--set", "t1=3.0", "--set", "solver.rtol=1e-10",
                   "--set", "solver.atol=1e-10", "--set", 'outputs=["npz"]',
                   "--no-cache", "--quiet") == 0  # fmt: skip
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
    "bad coordinate": ("[initial]\nfixed_q = ['z']\n", "'initial.fixed_q'"),
    "short q": ("[initial]\nq = [1.0]\n", "'initial.q': expected 2 numbers"),
    "duplicate labels": ("[[runs]]\nlabel = 'a'\n[[runs]]\nlabel = 'a'\n", "twice"),
    "missing label": ("[[runs]]\n[[runs]]\n", "'runs[0].label'"),
    "bool as number": ("save_points = true\n", "'save_points'"),
    # Strings are data, never code: only 'system = "module:factory"' imports.
    "code as a value": (
        "[params]\nm = \"__import__('os').getcwd()\"\n",
        "'params.m': expected a number",
    ),
}


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
    assert run_cli("run", config, "--out", out, "--no-cache", "--quiet") == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "precious.txt").read_text() == "keep me"
    # A failing run leaves the old folder as it was, even with --force.
    args = ("--no-cache", "--quiet", "--force", "--set", "solver.max_steps=2",
            "--set", "t1=5.0", "--set", "save_points=3")  # fmt: skip
    assert run_cli("run", config, "--out", out, *args) == 1
    err = capsys.readouterr().err
    assert "max_steps" in err and "Traceback" not in err
    assert (out / "precious.txt").exists()
    assert run_cli("run", config, "--out", out, "--no-cache", "--quiet", "--force") == 0
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "trajectory.npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "p.toml"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert run_cli("run", config, "--out", blocker / "sub") == 2
    assert "cannot create" in capsys.readouterr().err


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
    assert run_cli("run", config, "--out", out, "--no-cache", "--quiet") == 0
    q = np.load(out / "trajectory.npz")["q"]
    np.testing.assert_allclose(np.hypot(q[:, 0], q[:, 1]), 1.0, rtol=1e-10)
    assert json.loads((out / "summary.json").read_text())["system"] == "my_rig"


def test_list(capsys):
    assert run_cli("list") == 0
    out = capsys.readouterr().out
    for name in ("pendulum", "slider_pendulum", "double_pendulum"):
        assert f"{name}:" in out
    assert "k = 10" in out and "x1 [m]" in out


def test_console_script_help_and_errors(tmp_path):
    """The installed command: --help explains both commands; a bad config
    gives exit status 2 and one line, without a traceback."""
    exe = Path(sys.executable).parent / "lagrax"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "lagrax"]
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
    comes from the persistent cache, so the cache gains no entry."""
    env = {**os.environ, "LAGRAX_CACHE_DIR": str(tmp_path / "cache")}
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
