import os
import shutil
import tempfile

import jax


jax.config.update("jax_enable_x64", True)


def pytest_configure(config):
    """One compilation cache for the CLI's runs in this test session, shared by
    the xdist workers (they inherit the environment): the CLI compiles each run
    ahead of time, and the tests run the same configs several times. Never the
    user's own cache; removed when the session ends."""
    if "LAGRAX_CACHE_DIR" not in os.environ:
        path = tempfile.mkdtemp(prefix="lagrax-test-cache-")
        os.environ["LAGRAX_CACHE_DIR"] = path
        config._lagrax_cache_dir = path


def pytest_unconfigure(config):
    path = getattr(config, "_lagrax_cache_dir", None)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
