import os
import shutil
import subprocess
import sys
import tempfile

import jax
import pytest


jax.config.update("jax_enable_x64", True)

# XLA:CPU compiles lagrax's programs 1.6x faster with its loop emitters than with
# its default fusion emitters, into code that runs as fast
# (benchmarks/compile_time.py); the CLI compiles with the same option. Compiling
# is most of this suite's time. Set for the session (the xdist workers and the
# subprocesses inherit it) before any backend starts, where this XLA has the
# option: XLA aborts on a flag it does not know, so that is asked of a child
# process first.
FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false"
# And for the tests only: LLVM's cheaper code generation (what JAX's
# `jax_disable_most_optimizations` sets), a third less compile time and, for
# these small programs, no slower to run (tests/test_tree.py, test_batch.py and
# test_gradients.py in one process: compile 141 -> 96 s, the rest 68 -> 63 s).
CHEAP_CODEGEN = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
)


def _fast_compile_flags() -> str | None:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in flags:
        return None  # the user's own choice
    flags = f"{flags} {FAST_COMPILE} {CHEAP_CODEGEN}".strip()
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.devices()"],
        env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
    )
    return flags if probe.returncode == 0 else None


def pytest_configure(config):
    """One compilation cache for this test session, shared by the xdist workers
    and the processes they start (they inherit the environment): the CLI
    compiles each run ahead of time, and the tests run the same configs and
    models several times. Never the
    user's own cache; removed when the session ends. And the fast-compiling XLA
    option above, set once by the process that starts the workers."""
    if "LAGRAX_CACHE_DIR" not in os.environ:
        path = tempfile.mkdtemp(prefix="lagrax-test-cache-")
        os.environ["LAGRAX_CACHE_DIR"] = path
        config._lagrax_cache_dir = path
        # The same cache for every JAX program of the session (the workers and
        # the examples' and README's processes read this when they import jax):
        # a program two of them compile alike is compiled once.
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", path)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        flags = _fast_compile_flags()
        if flags is not None:
            os.environ["XLA_FLAGS"] = flags


# The xdist workers take whole files (`--dist loadgroup` in pyproject.toml, one
# group per file): a file's tests share compiled programs, which a second worker
# would compile again (the suite's CPU time fell by a fifth so: 2 workers, 20.5
# -> 16.5 min). Except the files whose tests each run their own process (the
# README, the examples, the benchmarks): compiling nothing in the worker, those
# spread over all workers, so that no worker is left alone with the longest file.
# Longest first, so that both workers stay busy to the end.
_OWN_PROCESSES = ("test_examples.py",)
_LONGEST_FIRST = (
    "test_examples.py",
    "test_cli.py",
    "test_optimize_controls.py",
    "test_gradients.py",
    "test_import.py",
    "test_batch.py",
    "test_reliability.py",
    "test_simulate.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        return (
            _LONGEST_FIRST.index(name)
            if name in _LONGEST_FIRST
            else len(_LONGEST_FIRST)
        )

    items.sort(key=rank)  # stable: the rest keep their order
    for item in items:
        if item.path.name not in _OWN_PROCESSES:
            item.add_marker(pytest.mark.xdist_group(item.path.name))


def pytest_unconfigure(config):
    path = getattr(config, "_lagrax_cache_dir", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
