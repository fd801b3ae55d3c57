"""Batches: vmap equals a loop; sharding over devices changes no number."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


# The pendulum: the cheapest model to compile; batching is the same for all.
MODEL = lx.systems.pendulum()
PARAMS = {k: jnp.asarray(v, dtype=float) for k, v in MODEL.params.items()}
B = 6
TS = jnp.linspace(0.0, 1.0, 3)


def _batch():
    q0, _ = MODEL.initial_state()
    tangent = jnp.array([-q0[1], q0[0]])  # consistent: J qd = 2 q . qd = 0
    scale = 0.2 + 0.1 * jnp.arange(B)[:, None]
    return jnp.stack([q0] * B), tangent * scale


def final(q0, qd0, g):
    params = {**PARAMS, "g": g}
    return lx.simulate(MODEL.system, q0, qd0, params, t1=1.0, ts=TS).q[-1]


def test_vmap_over_states_and_params_equals_loop():
    q0s, qd0s = _batch()
    gs = PARAMS["g"] * (1.0 + 0.2 * jnp.arange(B))
    batched = jax.jit(jax.vmap(final))(q0s, qd0s, gs)
    looped = jnp.stack([final(q0s[i], qd0s[i], gs[i]) for i in range(B)])
    np.testing.assert_allclose(batched, looped, atol=1e-12)


def test_simulate_batch_returns_whole_trajectories():
    q0s, qd0s = _batch()
    params = {k: jnp.full(B, v) for k, v in PARAMS.items()}
    sol = lx.simulate_batch(
        MODEL.system, q0s, qd0s, params, params_batched=True, t1=1.0, ts=TS
    )
    assert sol.q.shape == (B, 3, 2) and sol.multipliers.shape == (B, 3, 1)
    assert sol.stats["num_steps"].shape == (B,)
    # The same program as the loop of the test above.
    one = lx.simulate(MODEL.system, q0s[2], qd0s[2], PARAMS, t1=1.0, ts=TS)
    np.testing.assert_allclose(sol.q[2], one.q, atol=1e-12)
    np.testing.assert_allclose(sol.multipliers[2], one.multipliers, atol=1e-10)


SHARDED = textwrap.dedent(
    """
    import jax
    import lagrax as lx  # starts no JAX backend: use_cpu_devices still works
    lx.use_cpu_devices(4)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    assert len(jax.devices()) == 4, jax.devices()
    model = lx.systems.pendulum()  # the cheapest to compile
    q0, _ = model.initial_state()
    B = 10  # not a multiple of 4: padded and trimmed
    q0s = jnp.stack([q0] * B)
    qd0s = jnp.array([-q0[1], q0[0]]) * (0.2 + 0.05 * jnp.arange(B)[:, None])
    kw = dict(t1=2.0, ts=jnp.linspace(0.0, 2.0, 5))
    sharded = lx.simulate_batch(model.system, q0s, qd0s, model.params, **kw)
    single = lx.simulate_batch(
        model.system, q0s, qd0s, model.params, devices=jax.devices()[:1], **kw
    )
    assert sharded.q.shape == (B, 5, 2)
    # Equal to round-off: a device vectorizes its 3 members, not all 12, so
    # XLA may order the floating-point operations differently.
    np.testing.assert_allclose(sharded.q, single.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sharded.multipliers, single.multipliers, atol=1e-10)
    assert len(sharded.q.sharding.device_set) >= 1
    # The four-bar, 64 members a device: its batched LAPACK calls (Cholesky,
    # SVD) fan out over XLA's CPU pool and wait for it; with one pool thread per
    # device they hung (jaxlib 0.10), with use_cpu_devices's pool they run.
    model = lx.systems.four_bar()
    q0, qd0 = model.initial_state()
    q0s = jnp.stack([q0] * 256)
    qd0s = qd0 * jnp.linspace(0.5, 1.5, 256)[:, None]
    kw = dict(t1=1.0, ts=jnp.linspace(0.0, 1.0, 3))
    sharded = lx.simulate_batch(model.system, q0s, qd0s, model.params, **kw)
    single = lx.simulate_batch(
        model.system, q0s, qd0s, model.params, devices=jax.devices()[:1], **kw
    )
    np.testing.assert_allclose(sharded.q, single.q, rtol=0, atol=1e-12)
    print("sharded over", len(jax.devices()), "devices: identical to round-off")
    """
)


def test_sharded_over_four_cpu_devices():
    proc = subprocess.run(
        [sys.executable, "-c", SHARDED], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical" in proc.stdout


UNSAFE = textwrap.dedent(
    """
    import jax
    import lagrax as lx
    from jax._src import xla_bridge
    assert not xla_bridge.backends_are_initialized()  # import lagrax starts none
    jax.config.update("jax_enable_x64", True)
    model = lx.systems.pendulum()
    q0, qd0 = model.initial_state()
    assert len(jax.devices()) == 2
    try:
        lx.simulate_batch(model.system, [q0] * 2, [qd0] * 2, model.params, t1=1.0)
    except RuntimeError as e:
        assert "use_cpu_devices(2)" in str(e) and "NPROC=4" in str(e), e
        print("refused")
    try:
        lx.use_cpu_devices(2)
    except RuntimeError as e:
        assert "right after `import jax`" in str(e), e
        print("too late")
    """
)


def test_cpu_devices_without_enough_pool_threads_are_refused_not_hung():
    """Two CPU devices on a pool of two threads: simulate_batch refuses with the
    remedy instead of risking the hang; use_cpu_devices after JAX started says
    when to call it."""
    flags = os.environ.get("XLA_FLAGS", "")  # the session's own flags kept
    flags = f"{flags} --xla_force_host_platform_device_count=2"
    env = {**os.environ, "XLA_FLAGS": flags, "NPROC": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", UNSAFE], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["refused", "too late"], proc.stdout


def test_use_cpu_devices_checks_its_argument():
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="use_cpu_devices: count"):
            lx.use_cpu_devices(bad)


POOL = textwrap.dedent(
    """
    import glob, os
    import jax
    import lagrax
    jax.numpy.zeros(1)  # the CPU backend starts
    names = [open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm")]
    print(os.environ.get("NPROC"), names.count("tf_XLAEigen"))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_import_widens_the_cpu_pool_unless_the_user_sized_it():
    """jaxlib 0.10's batched LAPACK kernels hang a pool with as few threads as
    concurrent LAPACK calls (two on a 2-core machine: a forward-mode fit hung so);
    `import lagrax` asks for at least 16 threads before the backend starts, and
    leaves a user's NPROC alone."""
    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    wide = max(len(os.sched_getaffinity(0)), 16)
    for nproc, expected in ((None, f"{wide} {wide}"), ("3", "3 3")):
        if nproc is not None:
            env["NPROC"] = nproc
        proc = subprocess.run(
            [sys.executable, "-c", POOL], env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == expected.split(), proc.stdout
