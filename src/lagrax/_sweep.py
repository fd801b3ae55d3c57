"""`sweep`: batches larger than memory, streamed through the devices in chunks to
disk, resumable, with per-member result codes."""

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from tqdm.auto import tqdm

from ._batch import check_batched_params, gather, simulate_batch
from ._custom_types import Params
from ._results import RESULTS, is_failure, result_names
from ._system import System
from ._trajectory import Trajectory


_MANIFEST = "sweep.json"
_FORMAT = "lagrax-sweep-1"


def _chunk_file(k: int) -> str:
    return f"chunk_{k:06d}.npz"


def default_save(sol: Trajectory) -> dict[str, jax.Array]:
    """What [`lagrax.sweep`][] keeps of each member by default: the states at the
    saved times, the energy and the number of steps."""
    return {
        "q": sol.q,
        "qd": sol.qd,
        "energy": sol.energy,
        "num_steps": sol.stats["num_steps"],
    }


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A sweep on disk: one `.npz` file per chunk of members and a manifest.

    Read it while it runs or after (also from another process):
    `lx.load_sweep(path)`. Nothing is held in memory until asked for.

    **Fields:**

    - `path`: the folder.
    - `num_members`, `chunk_size`, `num_chunks`: the layout.
    - `ts`: the saved times (the same for every member).
    - `fields`: the names of the saved per-member arrays, besides `result` (the
        result code of each member) and `index` (the member numbers).
    """

    path: Path
    num_members: int
    chunk_size: int
    num_chunks: int
    ts: np.ndarray
    fields: tuple[str, ...]

    def done(self) -> list[int]:
        """The chunks written so far."""
        return [
            k for k in range(self.num_chunks) if (self.path / _chunk_file(k)).exists()
        ]

    def chunks(self, *fields: str) -> Iterator[dict[str, np.ndarray]]:
        """The written chunks one at a time, in order: `index`, `result` and
        `fields` (default all). Memory stays at one chunk's."""
        names = ("index", "result", *(fields or self.fields))
        for k in self.done():
            with np.load(self.path / _chunk_file(k)) as data:
                yield {name: data[name] for name in names}

    def load(self, *fields: str) -> dict[str, np.ndarray]:
        """`index`, `result` and `fields` (default all) of every written member,
        concatenated in member order. For a sweep larger than memory, ask for the
        fields you need, or use `chunks()`."""
        parts = list(self.chunks(*fields))
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}

    def status(self) -> np.ndarray:
        """The result name of every written member ('successful', 'max_steps',
        ...), in member order."""
        codes = [c["result"] for c in self.chunks("result")]
        if not codes:
            return np.zeros((0,), dtype="<U1")
        return result_names(_codes(np.concatenate(codes)))

    def failed(self) -> np.ndarray:
        """The numbers of the members that failed (anything but successful)."""
        out = [
            c["index"][np.asarray(is_failure(_codes(c["result"])))]
            for c in self.chunks("result")
        ]
        return np.concatenate(out) if out else np.zeros((0,), dtype=np.int64)


def _codes(values) -> RESULTS:
    """Stored result codes as a `RESULTS` of their shape."""
    return eqx.tree_at(lambda r: r._value, RESULTS.successful, jnp.asarray(values))


def load_sweep(path: str | os.PathLike) -> Sweep:
    """The sweep in folder `path` (written by [`lagrax.sweep`][]), finished or not."""
    path = Path(path)
    try:
        manifest = json.loads((path / _MANIFEST).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"load_sweep: {path} holds no sweep (no {_MANIFEST}); give the folder "
            "passed to lx.sweep(path=...)."
        ) from None
    return _from_manifest(path, manifest)


def _from_manifest(path: Path, manifest: dict) -> Sweep:
    return Sweep(
        path=path,
        num_members=manifest["num_members"],
        chunk_size=manifest["chunk_size"],
        num_chunks=manifest["num_chunks"],
        ts=np.asarray(manifest.get("ts", []), dtype=float),
        fields=tuple(manifest.get("fields", ())),
    )


def sweep(
    system: System,
    q0s,
    qd0s,
    params: Params,
    *,
    path: str | os.PathLike,
    chunk_size: int = 1024,
    params_batched: bool = False,
    save: Callable[[Trajectory], dict[str, Any]] = default_save,
    devices: list[jax.Device] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **simulate_kwargs: Any,
) -> Sweep:
    """Simulate a batch of any size in chunks, written to disk as it goes.

    Each chunk of `chunk_size` members is one [`lagrax.simulate_batch`][] call
    (vmapped, sharded over `devices`; one compilation for all chunks, the last
    padded), and what `save` keeps of it is written to `path/chunk_NNNNNN.npz`
    with every member's result code, before the next chunk starts. Memory stays
    at one chunk's whatever the number of members; with NumPy memory maps as
    inputs (`np.load(file, mmap_mode="r")`) the inputs need not fit in memory
    either.

    **Resuming.** Run the same call again after an interruption (Ctrl-C, a lost
    job): the chunks on disk are kept, checked against the inputs they were
    computed from, and only the missing ones computed. A folder holding a sweep
    with other settings or inputs is refused, not overwritten, unless
    `overwrite=True`. Chunk files appear whole or not at all (written to a
    temporary name, then renamed).

    **Several processes.** After `jax.distributed.initialize()`, call `sweep`
    with the same arguments on every process: each chunk is sharded over all
    processes' devices, and process 0 writes it (`path` on a filesystem that
    process 0 can write; others may read it).

    **Arguments:**

    - `system`, `params`, `params_batched`, `**simulate_kwargs`: as for
        [`lagrax.simulate_batch`][] (`t1=` is required; `throw` is not taken: a
        failed member is recorded, not raised).
    - `q0s`, `qd0s`: (B, n) initial states, read one chunk (a slice) at a time:
        arrays, memory maps, or any object with a `.shape` whose slices are the
        rows (states generated on demand).
    - `path`: the folder to write (created if missing).
    - `chunk_size`: members per chunk (default 1024): large enough to fill the
        devices, small enough for their memory.
    - `save`: what to keep of a chunk's batched [`lagrax.Trajectory`][]: a dict
        of arrays with a leading member axis. Default: `q`, `qd`, `energy` and
        `num_steps` ([`lagrax.default_save`][]); for large sweeps keep less,
        e.g. `lambda sol: {"q_end": sol.q[:, -1]}`.
    - `devices`: default all.
    - `progress`: a progress bar with members per second.
    - `overwrite`: replace a sweep already in `path`.

    **Returns:**

    A [`lagrax.Sweep`][]: `sweep.load("q")`, `sweep.failed()`, `sweep.status()`.
    """
    if "throw" in simulate_kwargs:
        raise ValueError(
            "sweep: `throw` is not taken; a failed member is recorded with its "
            "result code (sweep(...).failed() lists them)."
        )
    if not (isinstance(chunk_size, int) and chunk_size >= 1):
        raise ValueError(f"sweep: chunk_size must be an int >= 1, got {chunk_size!r}.")
    shape, shape_d = np.shape(q0s), np.shape(qd0s)
    if len(shape) != 2 or shape != shape_d:
        raise ValueError(
            f"sweep: q0s and qd0s must both have shape (B, n), got {shape} and "
            f"{shape_d}."
        )
    num = shape[0]
    if num == 0:
        raise ValueError("sweep: q0s holds no members.")
    if params_batched:
        check_batched_params("sweep", params, num)
    path = Path(path)
    num_chunks = -(-num // chunk_size)
    settings = _describe(
        {**simulate_kwargs, "params": None if params_batched else params}
    )
    manifest = {
        "format": _FORMAT,
        "num_members": num,
        "chunk_size": chunk_size,
        "num_chunks": num_chunks,
        "n": shape[1],
        "params_batched": params_batched,
        "settings": settings,
    }
    writer = jax.process_index() == 0
    if writer:
        manifest = _open_folder(path, manifest, overwrite)
    done = np.zeros(num_chunks, dtype=bool)
    if writer:
        done[[k for k in range(num_chunks) if (path / _chunk_file(k)).exists()]] = True
    if jax.process_count() > 1:
        done = np.asarray(multihost_utils.broadcast_one_to_all(done))

    def inputs(k):
        sl = slice(k * chunk_size, min((k + 1) * chunk_size, num))
        q = np.asarray(q0s[sl])
        qd = np.asarray(qd0s[sl])
        p = (
            jax.tree.map(lambda x: np.asarray(x[sl]), params)
            if params_batched
            else params
        )
        return sl, q, qd, p

    # Chunks already on disk: kept if computed from these inputs.
    if writer:
        for k in np.flatnonzero(done):
            _, q, qd, p = inputs(k)
            with np.load(path / _chunk_file(k)) as data:
                stored = str(data["inputs"])
            if stored != _fingerprint(q, qd, p if params_batched else None):
                raise ValueError(
                    f"sweep: {path / _chunk_file(k)} was computed from other initial "
                    "states or parameters than those given now. Pass "
                    "overwrite=True to start afresh, or another path."
                )

    bar = tqdm(
        total=num,
        initial=int(
            sum(min(chunk_size, num - k * chunk_size) for k in np.flatnonzero(done))
        ),
        unit=" members",
        unit_scale=num >= 10_000,
        smoothing=0.1,
        disable=not (progress and writer),
        desc="sweep",
    )
    first = True
    with bar, _interrupted_note(path, num_chunks, writer):
        for k in np.flatnonzero(~done):
            sl, q, qd, p = inputs(k)
            count = q.shape[0]
            q_pad, qd_pad = _pad(q, chunk_size), _pad(qd, chunk_size)
            p_pad = (
                jax.tree.map(lambda x: _pad(x, chunk_size), p) if params_batched else p
            )
            sol = simulate_batch(
                system, q_pad, qd_pad, p_pad, params_batched=params_batched,
                devices=devices, throw=False, **simulate_kwargs,
            )  # fmt: skip
            kept = save(sol)
            if not isinstance(kept, dict):
                raise TypeError(
                    "sweep: save must return a dict of arrays with a leading member "
                    f"axis; it returned {type(kept).__name__}."
                )
            arrays = {name: gather(jnp.asarray(x))[:count] for name, x in kept.items()}
            arrays["result"] = gather(sol.result._value)[:count]
            arrays["index"] = np.arange(sl.start, sl.stop)
            arrays["inputs"] = np.asarray(
                _fingerprint(q, qd, p if params_batched else None)
            )
            # Gathered on every process alike (a collective), written by one.
            if first:
                ts, first = gather(sol.ts)[0], False
            if writer:
                if "fields" not in manifest:
                    manifest["fields"] = list(kept)
                    manifest["ts"] = np.asarray(ts).tolist()
                    _write_json(path / _MANIFEST, manifest)
                _write_npz(path / _chunk_file(k), arrays)
            bar.update(count)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("lagrax.sweep finished")
    result = load_sweep(path)
    if writer:
        _write_failed(result)
    return result


@contextlib.contextmanager
def _interrupted_note(path: Path, num_chunks: int, writer: bool):
    try:
        yield
    except KeyboardInterrupt:
        if writer:
            done = sum((path / _chunk_file(k)).exists() for k in range(num_chunks))
            print(
                f"sweep interrupted: {done} of {num_chunks} chunks are in {path}; "
                "run the same call again to compute the rest."
            )
        raise


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    if x.shape[0] == size:
        return x
    return np.concatenate([x, np.repeat(x[-1:], size - x.shape[0], axis=0)])


def _fingerprint(*trees) -> str:
    """A digest of the arrays in `trees` (their dtypes, shapes and values)."""
    digest = hashlib.blake2b(digest_size=16)
    for leaf in jax.tree.leaves(trees):
        a = np.ascontiguousarray(np.asarray(leaf))
        digest.update(str((a.dtype, a.shape)).encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def _describe(kwargs: dict) -> dict:
    """A JSON record of the settings, to tell a resumed sweep from another one."""
    out = {}
    for key in sorted(kwargs):
        value = kwargs[key]
        leaves = jax.tree.leaves(value)
        if value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
        elif leaves and all(
            isinstance(x, (np.ndarray, jax.Array, float, int)) for x in leaves
        ):
            out[key] = _fingerprint(value)
        else:
            out[key] = repr(value)
    return out


def _open_folder(path: Path, manifest: dict, overwrite: bool) -> dict:
    """Create `path` for a new sweep, or check that it holds this one."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"sweep: path {path} is a file; give a folder.")
    existing = path / _MANIFEST
    if existing.exists():
        old = json.loads(existing.read_text())
        if overwrite:
            for k in range(old.get("num_chunks", 0)):
                (path / _chunk_file(k)).unlink(missing_ok=True)
            (path / "failed.json").unlink(missing_ok=True)
            existing.unlink()
        else:
            differ = [
                key
                for key in (
                    "num_members",
                    "chunk_size",
                    "n",
                    "params_batched",
                    "settings",
                )
                if old.get(key) != manifest[key]
            ]
            if old.get("format") != _FORMAT or differ:
                what = ", ".join(differ) or "format"
                raise ValueError(
                    f"sweep: {path} holds a sweep with other {what}; pass "
                    "overwrite=True to replace it, or give another path."
                )
            return old
    elif path.exists() and any(path.iterdir()):
        raise ValueError(
            f"sweep: {path} exists and holds other files, not a sweep; give a new "
            "or empty folder."
        )
    path.mkdir(parents=True, exist_ok=True)
    _write_json(existing, manifest)
    return manifest


def _write_npz(target: Path, arrays: dict) -> None:
    tmp = target.with_name(target.name + ".tmp")
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: tmp.unlink(missing_ok=True))
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, target)


def _write_json(target: Path, data: dict) -> None:
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, target)


def _write_failed(result: Sweep) -> None:
    """failed.json: the failed members by result name, next to the data. One
    pass over the chunks, naming only the failed members."""
    failed: dict[str, list[int]] = {}
    for chunk in result.chunks("result"):
        bad = np.asarray(is_failure(_codes(chunk["result"])))
        names = result_names(_codes(chunk["result"][bad])).tolist()
        for name, index in zip(names, chunk["index"][bad].tolist(), strict=True):
            failed.setdefault(name, []).append(int(index))
    _write_json(result.path / "failed.json", {"failed": failed})
