"""The README's code and the example scripts run, so that they cannot rot."""

import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def _run(args, cwd):
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_readme_code_runs(tmp_path):
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    script = tmp_path / "readme.py"
    script.write_text("\n".join(blocks))
    out = _run([str(script)], cwd=tmp_path)
    assert "e-1" in out  # the printed max |phi| is at round-off


def test_readme_commands_match_ci():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = 'python -m pip install -e ".[test]" && python -m pytest'
    assert test_command in readme and test_command in ci


def test_pendulum_drift_example(tmp_path):
    figure = tmp_path / "drift.png"
    out = _run(
        [str(ROOT / "examples" / "pendulum_drift.py"), "--quick", "--out", str(figure)],
        cwd=tmp_path,
    )
    assert "lambda(0) = 3.685" in out and "projection" in out
    assert figure.stat().st_size > 10_000
    # An existing figure is not overwritten without --force.
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "pendulum_drift.py"),
            "--quick",
            "--out",
            str(figure),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "--force" in proc.stderr
