"""Many processes (jax.distributed) and sweeps larger than memory: the numbers of
one process (simulations, a sweep, a batch of control optimisations), every member
computed once, memory flat as the sweep grows."""

import json
import os
import socket
import subprocess
import sys
import textwrap
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


MODEL = lx.systems.pendulum()  # the cheapest to compile; batching is the same for all
TS = jnp.linspace(0.0, 1.0, 5)


def _members(count):
    q0, _ = MODEL.initial_state()
    q0s = np.stack([np.asarray(q0)] * count)
    qd0s = np.array([-q0[1], q0[0]]) * (0.2 + 0.05 * np.arange(count)[:, None])
    return q0s, qd0s


WORKER = textwrap.dedent(
    """
    import os, sys
    process_id, port, out, job = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    import jax
    import lagrax as lx
    lx.use_cpu_devices(2)  # before the backends start (distributed.initialize)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}",
                               num_processes=2, process_id=process_id)
    import jax.numpy as jnp, numpy as np
    from jax.experimental import multihost_utils
    from tests.test_distributed import MODEL, TS, _members
    assert jax.device_count() == 4 and jax.local_device_count() == 2
    if job == "optimise":
        # A batch of control optimisations (the rail problem of
        # test_optimize_controls, one goal and mass per member), sharded over
        # both processes' devices.
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        from tests.test_distributed import optimisations
        mesh = Mesh(np.asarray(jax.devices()), ("batch",))
        shard = NamedSharding(mesh, PartitionSpec("batch"))
        goals, masses = (jax.make_array_from_callback((4,), shard, lambda i, v=v: v[i])
                         for v in (np.linspace(0.5, 1.2, 4), np.linspace(1.0, 2.5, 4)))
        u = multihost_utils.process_allgather(optimisations(goals, masses), tiled=True)
        if process_id == 0:
            np.save(out + "/controls.npy", np.asarray(u))
        print("process", process_id, "done", flush=True)
        sys.exit(0)
    q0s, qd0s = _members(10)
    # simulate_batch: a global array sharded over both processes (8 of 10: the
    # batch must divide over the 4 devices).
    sol = lx.simulate_batch(MODEL.system, q0s[:8], qd0s[:8], MODEL.params, t1=1.0,
                            ts=TS)
    q = multihost_utils.process_allgather(sol.q, tiled=True)
    # A sweep: 10 members in chunks of 8 (the last padded: the program of the
    # batch above), process 0 writes.
    sweep = lx.sweep(MODEL.system, q0s, qd0s, MODEL.params, path=out + "/sweep",
                     chunk_size=8, t1=1.0, ts=TS, progress=False)
    if process_id == 0:
        np.save(out + "/batch_q.npy", np.asarray(q))
    print("process", process_id, "done", flush=True)
    """
)


@jax.jit
def optimisations(goals, masses):
    """One control optimisation per (goal, mass) of test_optimize_controls's
    rail problem, vmapped: the optimal force values."""
    from .test_optimize_controls import PARAMS, solve

    def one(goal, mass):
        return solve({**PARAMS, "goal": goal, "mass": mass}).params["u"]

    return jax.vmap(one)(goals, masses)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(job, tmp_path):
    """Run WORKER's `job` in two local processes (jax.distributed, CPU
    collectives, two CPU devices each); they are always ended."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": root}
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(i), port, str(tmp_path), job],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out[-3000:]


def test_two_processes_give_the_numbers_of_one(tmp_path):
    """simulate_batch and sweep across two local processes against one process:
    equal to round-off."""
    _two_processes("simulate", tmp_path)
    q0s, qd0s = _members(10)
    one = lx.simulate_batch(MODEL.system, q0s, qd0s, MODEL.params, t1=1.0, ts=TS)
    np.testing.assert_allclose(np.load(tmp_path / "batch_q.npy"), one.q[:8], rtol=0,
                               atol=1e-12)  # fmt: skip
    sweep = lx.load_sweep(tmp_path / "sweep")
    data = sweep.load()
    assert list(data["index"]) == list(range(10)) and len(sweep.failed()) == 0
    np.testing.assert_allclose(data["q"], one.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(data["energy"], one.energy, rtol=1e-12)


@pytest.mark.slow  # 45-85 s: the interior-point solver compiled in three processes
def test_a_batch_of_control_optimisations_across_two_processes(tmp_path):
    """Four control optimisations vmapped and sharded over two processes: the
    numbers of one process, and each the closed-form optimum."""
    _two_processes("optimise", tmp_path)
    goals, masses = np.linspace(0.5, 1.2, 4), np.linspace(1.0, 2.5, 4)
    u = optimisations(jnp.asarray(goals), jnp.asarray(masses))
    np.testing.assert_allclose(np.load(tmp_path / "controls.npy"), u, atol=1e-10)
    # And each is the least-norm force of the transcription (closed form).
    from .test_optimize_controls import linear_map

    for i, (goal, mass) in enumerate(zip(goals, masses, strict=True)):
        exact = np.linalg.pinv(linear_map(mass)) @ np.array([goal, 0.0])
        np.testing.assert_allclose(u[i], exact, atol=1e-8)


class _Interrupting:
    """Initial states that raise KeyboardInterrupt when chunk `at` is read (as
    Ctrl-C there would), and count the chunks read."""

    def __init__(self, values, chunk_size, at=None):
        self.values, self.chunk_size, self.at, self.reads = values, chunk_size, at, []
        self.shape = values.shape

    def __getitem__(self, index):
        k = index.start // self.chunk_size
        if k == self.at:
            raise KeyboardInterrupt
        self.reads.append(k)
        return self.values[index]


def test_an_interrupted_sweep_resumes_computing_each_member_once(tmp_path, capsys):
    q0s, qd0s = _members(22)
    path = tmp_path / "sweep"
    kw = dict(path=path, chunk_size=4, t1=1.0, ts=TS, progress=False)
    broken = _Interrupting(q0s, 4, at=3)
    with pytest.raises(KeyboardInterrupt):
        lx.sweep(MODEL.system, broken, qd0s, MODEL.params, **kw)
    assert "3 of 6 chunks" in capsys.readouterr().out
    written = {f.name: f.stat().st_mtime_ns for f in path.glob("chunk_*.npz")}
    assert sorted(written) == [f"chunk_00000{k}.npz" for k in range(3)]
    assert not list(path.glob("*.tmp"))
    # The same call again: the three chunks on disk are checked (read), not
    # recomputed; the other three are computed.
    counted = _Interrupting(q0s, 4)
    sweep = lx.sweep(MODEL.system, counted, qd0s, MODEL.params, **kw)
    kept = path.glob("chunk_00000[012].npz")
    assert {f.name: f.stat().st_mtime_ns for f in kept} == written
    assert sorted(counted.reads) == [0, 1, 2, 3, 4, 5]  # 0-2 read only to check
    data = sweep.load()
    np.testing.assert_array_equal(data["index"], np.arange(22))  # each once
    one = lx.simulate_batch(MODEL.system, q0s, qd0s, MODEL.params, t1=1.0, ts=TS)
    np.testing.assert_allclose(data["q"], one.q, rtol=0, atol=1e-12)
    # Another sweep's folder is not overwritten without being asked.
    with pytest.raises(ValueError, match="other settings"):
        lx.sweep(MODEL.system, q0s, qd0s, MODEL.params, **{**kw, "t1": 2.0})
    with pytest.raises(ValueError, match="other initial states"):
        lx.sweep(MODEL.system, q0s, 2 * qd0s, MODEL.params, **kw)


def test_sweep_records_failed_members_and_keeps_memory_flat(tmp_path):
    """Members whose parameters are NaN fail and are listed (sweep.failed(),
    failed.json) with their result codes; the others are computed. The host
    memory a sweep allocates does not grow with the number of members: 10x the
    members, chunk by chunk, the same peak."""
    count = 40
    q0s, qd0s = _members(count)
    g = np.full(count, MODEL.params["g"])
    g[[5, 33]] = np.nan
    params = {k: np.full(count, v) for k, v in MODEL.params.items()} | {"g": g}
    sweep = lx.sweep(MODEL.system, q0s, qd0s, params, params_batched=True,
                     path=tmp_path / "a", chunk_size=8, t1=1.0, ts=TS, progress=False,
                     save=lambda sol: {"q_end": sol.q[:, -1]})  # fmt: skip
    assert list(sweep.failed()) == [5, 33]
    assert set(sweep.status()[[5, 33]]) == {"nonfinite_inputs"}
    failed = json.loads((tmp_path / "a" / "failed.json").read_text())["failed"]
    assert failed == {"nonfinite_inputs": [5, 33]}
    assert sweep.fields == ("q_end",)

    def peak(members):
        q0s, qd0s = _members(members)
        tracemalloc.start()
        lx.sweep(MODEL.system, q0s, qd0s, MODEL.params, path=tmp_path / str(members),
                 chunk_size=8, t1=1.0, ts=TS, progress=False)  # fmt: skip
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top - q0s.nbytes - qd0s.nbytes

    peak(8)  # compiled
    small, large = peak(80), peak(800)
    assert large < 1.5 * small + 200_000, (small, large)
