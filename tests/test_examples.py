"""The README's code and the example scripts run, so that they cannot rot."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(markdown: str) -> list[tuple[str, str]]:
    """(the heading of its section, code) of every Python block."""
    blocks, heading = [], ""
    pattern = r"(^#+ [^\n]*$|^```[a-z]*\n.*?```)"
    for part in re.split(pattern, markdown, flags=re.M | re.S):
        if part.startswith("#"):
            heading = part.lstrip("#").strip()
        elif part.startswith("```python"):
            blocks.append((heading, part[len("```python\n") : -3]))
    return blocks


# Each README block runs on its own, in a fresh namespace, unless its first line
# says `# continues: <section>`: then in a copy of the namespace that the first
# block of that section left. So a block that silently relies on another fails
# here (NameError).
_RUN_BLOCKS = """
import json, sys
blocks = json.loads(open(sys.argv[1]).read())
after = {}
for heading, code in blocks:
    first = code.splitlines()[0] if code.strip() else ""
    parent = None
    if first.startswith("# continues:"):
        parent = first.split(":", 1)[1].strip()
    namespace = dict(after[parent]) if parent else {"__name__": "__main__"}
    exec(compile(code, f"README block in {heading!r}", "exec"), namespace)
    after.setdefault(heading, namespace)
"""


def _run(args, cwd):
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_readme_code_runs(tmp_path):
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "run_blocks.py").write_text(_RUN_BLOCKS)
    out = _run([str(tmp_path / "run_blocks.py"), str(tmp_path / "blocks.json")],
               cwd=tmp_path)  # fmt: skip
    assert "e-1" in out  # the printed max |phi| is at round-off


def test_readme_commands_match_ci():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = 'python -m pip install -e ".[test]" && python -m pytest -n auto'
    assert test_command in readme and test_command in ci


EXAMPLES = sorted(
    p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")
)

# What each example must print (with --quick): a line a user would look for.
EXPECTED = {
    "chaotic_fit.py": (
        r"multiple shooting: \d+ steps, [\d.]+ s with compilation, residuals "
        r"(0\.9|1\.0)\d* sigma; converged"
    ),
    "double_swing_up.py": (
        r"converged in \d+ iterations .* constraint violation \d\.\de-(09|1\d); "
        r"re-simulated with adaptive steps: terminal error \d\.\de-0[2-9]"
    ),
    "pendulum_drift.py": r"lambda\(0\) = 3\.685",
    "fit_parameters.py": r"k +10\.0000 +14\.0000",
    "swing_up.py": (
        r"converged in \d+ iterations .* constraint violation \d\.\de-(09|1\d); "
        r"re-simulated with adaptive steps: terminal error \d\.\de-0[5-9]"
    ),
    "swing_up_batch.py": (
        r"8 swing-ups .* one vmapped call: 8/8 converged in \d+-\d+ iterations; "
        r"largest constraint violation \d\.\de-(09|1\d), largest terminal error "
        r"re-simulated \d\.\de-0[5-9]"
    ),
    "period_sweep.py": r"worst relative error of the period: \d\.\d+e-(1\d|0[7-9])",
    "robot_fit.py": r"every fitted value within [0-3]\.\d standard errors",
    "sympy_model.py": (
        r"largest difference \d\.\de-1\d[\s\S]*relative difference "
        r"\d\.\de-(0[6-9]|1\d)"
    ),
}


def test_every_example_is_covered():
    assert sorted(EXPECTED) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_quick(name, tmp_path):
    figure = tmp_path / "figure.png"
    out = _run(
        [str(ROOT / "examples" / name), "--quick", "--out", str(figure)], tmp_path
    )
    assert re.search(EXPECTED[name], out), out
    assert figure.stat().st_size > 10_000


def test_examples_do_not_overwrite_without_force(tmp_path):
    figure = tmp_path / "figure.png"
    figure.write_bytes(b"keep me")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pendulum_drift.py"), "--quick",
         "--out", str(figure)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert figure.read_bytes() == b"keep me"


# The benchmarks that need only the test extras run small, so that they cannot
# rot; each checks inside that its methods agree (no timing is asserted).
BENCHMARKS = {
    "batch.py": (["--batch", "8", "--steps", "20", "--repeats", "1"], r"lagrax .*x"),
    "bodies.py": (["--sizes", "2", "--repeats", "1"], r"\n +2 +[\d.]+ us"),
    "chain.py": (["--sizes", "8", "--repeats", "1"], r"\n +8 +[\d.]+ us"),
    "robots.py": (
        ["--quick", "--skip-mjx", "--repeats", "1"],
        r"hopper \| per step.*us \|",
    ),
    "tree_assemble.py": (
        ["--cases", "four_bar", "--steps", "20"],
        r"\| four_bar \| 9 / 8 \| 3 / 2 \|",
    ),
    "gpu_batch.py": (
        ["--cpu", "--system", "pendulum", "--sizes", "8", "16", "--max-chunk", "8"],
        r"saturates|still grows",
    ),
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_runs_small(name, tmp_path):
    args, expected = BENCHMARKS[name]
    out = _run([str(ROOT / "benchmarks" / name), *args], tmp_path)
    assert re.search(expected, out), out
