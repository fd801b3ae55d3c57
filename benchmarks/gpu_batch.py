"""Throughput of many simulations on a GPU: system-steps per second and memory
for batches of 10^3 to 10^7 members, and where throughput saturates.

Each batch runs through `lx.sweep` (chunks of at most --max-chunk members
streamed to a scratch folder, only the final state kept), so that 10^7 members
need no more device memory than one chunk. The initial states are generated
chunk by chunk (the model's start with its velocity scaled by a factor in
[0.5, 1.5]; consistent, since J qd = 0 is linear in qd). Compilation is
excluded: each chunk shape is compiled by a warm-up sweep first.

    python benchmarks/gpu_batch.py                  # on a machine with a GPU
    python benchmarks/gpu_batch.py --cpu --sizes 1000 10000   # the same on CPU
    python benchmarks/gpu_batch.py --cpu-devices 2 --sizes 4096   # per core

With --cpu-devices N the CPU is split into N JAX devices (`lx.use_cpu_devices`)
and every size runs on one of them and on all N, alternately --repeats times, so
that the scaling over cores is a ratio measured in one process.

Without a GPU (and without --cpu) it prints why and exits 0. Prints per batch
size: the chunk, wall time, members/s, system-steps/s (accepted steps summed
over members, per second), the peak device memory, and the size past which a
10x larger batch gains less than 10 % throughput.
"""

import argparse
import os
import sys
import tempfile
import time

import jax


jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


class _Members:
    """(B, n) initial states made on demand, one slice at a time."""

    def __init__(self, base, count, seed, velocity):
        self.base, self.count, self.seed, self.velocity = base, count, seed, velocity
        self.shape = (count, base.shape[0])

    def __getitem__(self, index):
        start, stop, _ = index.indices(self.count)
        rows = np.broadcast_to(self.base, (stop - start, self.base.shape[0]))
        if not self.velocity:
            return rows.copy()
        rng = np.random.default_rng([self.seed, start])
        return rows * rng.uniform(0.5, 1.5, size=(stop - start, 1))


def _device(cpu: bool):
    if cpu:
        return jax.devices("cpu")
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="four_bar")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10**3, 10**4, 10**5, 10**6, 10**7])  # fmt: skip
    parser.add_argument("--max-chunk", type=int, default=2**20)
    parser.add_argument("--t1", type=float, default=1.0)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--cpu", action="store_true", help="run on the CPU devices")
    parser.add_argument("--cpu-devices", type=int, default=0,
                        help="split the CPU into this many devices (implies --cpu) "
                        "and compare one device with all")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if args.cpu_devices:
        lx.use_cpu_devices(args.cpu_devices)  # before any JAX operation
        args.cpu = True
    devices = _device(args.cpu)
    if devices is None:
        print(
            "gpu_batch: no GPU found (jax.devices('gpu') is empty), nothing run. On "
            "a machine with an NVIDIA GPU: pip install -U 'jax[cuda12]', then run "
            "this again; or pass --cpu to measure the CPU."
        )
        return 0
    model = lx.systems.get(args.system)
    q0, qd0 = (np.asarray(x) for x in model.initial_state())
    kind = devices[0].platform
    print(f"{model.name}: n = {q0.shape[0]}, t1 = {args.t1:g} s, rtol = atol = "
          f"{args.rtol:g}, float64, {len(devices)} {kind} device(s): "
          f"{devices[0].device_kind}")  # fmt: skip
    print(f"{'members':>10s} {'devices':>7s} {'chunk':>8s} {'wall s':>8s} "
          f"{'members/s':>11s} {'steps/s':>11s} {'peak MiB':>9s}")  # fmt: skip
    kw = dict(t1=args.t1, rtol=args.rtol, atol=args.rtol, max_steps=100_000,
              progress=False,
              save=lambda sol: {"q_end": sol.q[:, -1],
                                "steps": sol.stats["num_accepted_steps"]})  # fmt: skip
    layouts = [devices[:1], devices] if args.cpu_devices > 1 else [devices]
    rates, compiled, runs = [], set(), 0
    with tempfile.TemporaryDirectory() as scratch:
        for count in args.sizes:
            best = {}
            for _ in range(args.repeats):
                for used in layouts:
                    chunk = min(count, args.max_chunk)
                    chunk = -(-chunk // len(used)) * len(used)
                    if (chunk, len(used)) not in compiled:  # compile it first
                        warm = _Members(q0, chunk, 0, False)
                        lx.sweep(model.system, warm, _Members(qd0, chunk, 0, True),
                                 model.params, chunk_size=chunk, devices=used,
                                 path=os.path.join(scratch, f"warm{runs}"),
                                 **kw)  # fmt: skip
                        compiled.add((chunk, len(used)))
                    runs += 1
                    start = time.perf_counter()
                    result = lx.sweep(
                        model.system, _Members(q0, count, 1, False),
                        _Members(qd0, count, 1, True), model.params,
                        path=os.path.join(scratch, f"run{runs}"), chunk_size=chunk,
                        devices=used, **kw,
                    )  # fmt: skip
                    wall = time.perf_counter() - start
                    steps = sum(float(c["steps"].sum()) for c in result.chunks("steps"))
                    failed = len(result.failed())
                    peak = _peak_mib(used)
                    best[len(used)] = min(best.get(len(used), np.inf), wall)
                    print(f"{count:10d} {len(used):7d} {chunk:8d} {wall:8.2f} "
                          f"{count / wall:11.4g} {steps / wall:11.4g} {peak:>9s}"
                          + (f"  ({failed} failed)" if failed else ""),
                          flush=True)  # fmt: skip
            rates.append(count / best[len(devices)])
            if len(layouts) > 1:
                print(f"{count} members: {len(devices)} devices run "
                      f"{best[1] / best[len(devices)]:.2f}x one device (best of "
                      f"{args.repeats}), {rates[-1] / len(devices):.4g} members/s "
                      "per device")  # fmt: skip
    for (small, r0), r1 in zip(zip(args.sizes, rates, strict=True), rates[1:],
                               strict=False):  # fmt: skip
        if r1 < 1.1 * r0:
            print(f"throughput saturates at about {small} members "
                  f"({r0:.4g} members/s)")  # fmt: skip
            break
    else:
        print("throughput still grows at the largest size")
    return 0


def _peak_mib(devices) -> str:
    stats = [d.memory_stats() or {} for d in devices]
    peaks = [s.get("peak_bytes_in_use") for s in stats]
    if any(p is None for p in peaks):
        return "n/a"
    return f"{max(peaks) / 2**20:.0f}"


if __name__ == "__main__":
    sys.exit(main())
