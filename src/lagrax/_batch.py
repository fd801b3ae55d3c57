"""`simulate_batch`: many simulations at once, sharded over the devices."""

import glob
import os
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import ArrayLike, Float

from ._custom_types import Params
from ._errors import raise_if_failed
from ._inputs import check_arguments, coerce_params, floats_as_arrays
from ._simulate import simulate
from ._system import System
from ._threads import POOL_FLOOR, cores as _cores
from ._trajectory import Trajectory


AXIS = "batch"


def simulate_batch(
    system: System,
    q0s: Float[ArrayLike, "B n"],
    qd0s: Float[ArrayLike, "B n"],
    params: Params,
    *,
    params_batched: bool = False,
    devices: list[jax.Device] | None = None,
    **simulate_kwargs: Any,
) -> Trajectory:
    """Simulate a batch of initial states (and parameters) over all devices.

    `jax.vmap` of [`lagrax.simulate`][] over the batch, its batch axis sharded
    over the devices with a `NamedSharding` on a one-axis `Mesh` (axis name
    `"batch"`), so that XLA partitions the solve: each device integrates its
    share. The numbers equal those of an unsharded `jax.vmap` (and of a loop) to
    round-off.

    A batch that does not divide evenly over the devices is padded by repeating
    its last member, and the padding removed from the result.

    Several hosts: call `jax.distributed.initialize()` first on every process and
    pass the same full batch everywhere; the devices default to `jax.devices()`,
    all of them, and the result is a global array sharded over the batch (gather
    it with `jax.experimental.multihost_utils.process_allgather`). Then the batch
    must divide evenly over the devices.

    **Arguments:**

    - `system`, `params`, `**simulate_kwargs`: as for [`lagrax.simulate`][]
        (`t1=` is required).
    - `q0s`, `qd0s`: (B, n) initial states, consistent with the constraints.
    - `params_batched`: whether every leaf of `params` has a leading batch axis
        of size B (one parameter set per member); otherwise the same parameters
        are used for all.
    - `devices`: the devices to use; default all (`jax.devices()`).

    **Returns:**

    A [`lagrax.Trajectory`][] whose fields have a leading batch axis (B, ...).
    """
    q0s = jnp.asarray(q0s)
    qd0s = jnp.asarray(qd0s)
    if q0s.ndim != 2 or q0s.shape != qd0s.shape:
        raise ValueError(
            "simulate_batch: q0s and qd0s must both have shape (B, n), got "
            f"{q0s.shape} and {qd0s.shape}."
        )
    dtype = jnp.result_type(q0s, qd0s, float)
    q0s, qd0s = q0s.astype(dtype), qd0s.astype(dtype)
    params = coerce_params(params)
    # Checked here, while the values are known: inside the vmapped solve they are
    # traced, and only a result code could report them.
    kw = simulate_kwargs
    check_arguments(
        "simulate_batch",
        t0=kw.get("t0", 0.0),
        **{k: kw.get(k) for k in ("t1", "ts", "dt0")},
        max_steps=kw.get("max_steps", 4096),
        **(
            {}
            if kw.get("stepsize_controller") is not None
            else {"rtol": kw.get("rtol"), "atol": kw.get("atol")}
        ),
    )
    # The failure check runs on the host, after the sharded solve: inside it, the
    # check's host callback (a branch, never taken on success) would make XLA's
    # partitioner gather the whole batch onto one device on every call.
    throw = simulate_kwargs.pop("throw", True)
    # Floats (t1, tolerances) as arrays: new values must not recompile.
    simulate_kwargs = floats_as_arrays({**simulate_kwargs, "throw": False})
    batch = q0s.shape[0]
    if params_batched:
        check_batched_params("simulate_batch", params, batch)
    devices = jax.devices() if devices is None else list(devices)
    check_cpu_pool("simulate_batch", devices)
    mesh = Mesh(np.asarray(devices), (AXIS,))
    padded = -(-batch // len(devices)) * len(devices)

    def pad(x):
        x = jnp.asarray(x)
        if padded == batch:
            return x
        return jnp.concatenate([x, jnp.repeat(x[-1:], padded - batch, axis=0)])

    q0s, qd0s = pad(q0s), pad(qd0s)
    if params_batched:
        params = jax.tree.map(pad, params)
    out = _sharded(system, mesh, q0s, qd0s, params, params_batched, simulate_kwargs)
    if padded != batch:
        out = jax.tree.map(lambda x: x[:batch] if eqx.is_array(x) else x, out)
    if throw:
        raise_if_failed(gather(out.result._value))
    return out


def use_cpu_devices(count: int) -> None:
    """Split this process's CPU into `count` JAX devices, so that
    [`lagrax.simulate_batch`][] and [`lagrax.sweep`][] shard a batch over its
    cores (one device per core is the usual choice). Call it right after
    `import jax`, before any JAX operation (and before
    `jax.distributed.initialize`).

    It sets `jax_num_cpu_devices` and gives XLA's CPU thread pool at least
    `2 * count` threads, and at least 16 (the `NPROC` environment variable, read
    once when the CPU backend starts). The pool must be larger than the number
    of devices: jaxlib 0.10's batched LAPACK kernels (Cholesky, LU, SVD, ...)
    wait on the pool for their own sub-tasks, so with one pool thread per device
    every device can end up waiting and the run hangs. `simulate_batch` refuses
    such a configuration instead of hanging.

    **Arguments:**

    - `count`: the number of CPU devices, >= 1.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(
            f"use_cpu_devices: count must be an integer >= 1, got {count!r}."
        )
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError as e:
        raise RuntimeError(
            "use_cpu_devices: JAX's backends have already started in this "
            "process; call lagrax.use_cpu_devices right after `import jax`, before "
            "any JAX operation."
        ) from e
    threads = max(
        _cores(), 2 * count, POOL_FLOOR, int(os.environ.get("NPROC", "0") or 0)
    )
    os.environ["NPROC"] = str(threads)


def _cpu_pool_threads() -> int:
    """The threads of XLA's CPU pool in this process: counted where Linux names
    them (`tf_XLAEigen`), else the size XLA chooses (`NPROC`, else the cores)."""
    names = []
    for path in glob.glob("/proc/self/task/*/comm"):
        try:
            with open(path) as f:
                names.append(f.read().strip())
        except OSError:  # a thread that ended meanwhile
            pass
    counted = sum(name == "tf_XLAEigen" for name in names)
    if counted:
        return counted
    nproc = os.environ.get("NPROC", "")
    return int(nproc) if nproc.isdigit() else _cores()


def check_cpu_pool(caller: str, devices: list[jax.Device]) -> None:
    """Refuse to shard over more CPU devices of this process than XLA's CPU pool
    can serve (see [`lagrax.use_cpu_devices`][]): such a run can hang."""
    local = sum(
        d.platform == "cpu" and d.process_index == jax.process_index() for d in devices
    )
    if local < 2:
        return
    threads = _cpu_pool_threads()
    if threads > local:
        return
    raise RuntimeError(
        f"{caller}: sharding over {local} CPU devices of this process, whose XLA "
        f"CPU thread pool has {threads} threads; it needs more threads than "
        "devices, or jaxlib's batched LAPACK kernels (Cholesky, LU, SVD) can wait "
        "on each other and hang. Start the process with "
        f"lagrax.use_cpu_devices({local}) right after `import jax` (instead of "
        f"--xla_force_host_platform_device_count), or set NPROC={2 * local} in the "
        "environment, or pass devices=jax.devices()[:1]."
    )


def check_batched_params(caller: str, params: Params, batch: int) -> None:
    """Every leaf of `params` has a leading axis of size `batch`, or a ValueError
    from `caller` says which does not."""
    for leaf in jax.tree.leaves(params):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != batch:
            raise ValueError(
                f"{caller}: with params_batched=True every leaf of params needs a "
                f"leading axis of size {batch}; got one of shape {np.shape(leaf)}."
            )


def gather(x) -> np.ndarray:
    """`x` on this host as NumPy: with several processes, every process's shards
    of a global array (`process_allgather`)."""
    if jax.process_count() > 1 and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


@eqx.filter_jit
def _sharded(system, mesh, q0s, qd0s, params, params_batched, simulate_kwargs):
    # GSPMD: constrain the batch axis of the inputs to the mesh and let XLA
    # partition the vmapped solve along it.
    batched = NamedSharding(mesh, PartitionSpec(AXIS))
    q0s = jax.lax.with_sharding_constraint(q0s, batched)
    qd0s = jax.lax.with_sharding_constraint(qd0s, batched)
    if params_batched:
        params = jax.tree.map(
            lambda x: jax.lax.with_sharding_constraint(x, batched), params
        )
    out = jax.vmap(
        lambda q, qd, p: simulate(system, q, qd, p, **simulate_kwargs),
        in_axes=(0, 0, 0 if params_batched else None),
    )(q0s, qd0s, params)
    return jax.tree.map(
        lambda x: (
            jax.lax.with_sharding_constraint(x, batched)
            if eqx.is_array(x) and x.ndim > 0
            else x
        ),
        out,
    )
