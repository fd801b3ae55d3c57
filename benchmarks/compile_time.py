"""Compile time on a CPU: XLA's default fusion emitters against its loop emitters.

For each built-in system, the program of one `lx.simulate` (21 saved times, every
output of the Trajectory used) is traced, lowered and compiled: with XLA:CPU's
defaults, and with `xla_cpu_use_fusion_emitters=False` (the option `lagrax run`
compiles with, and the test suite sets in XLA_FLAGS). Each compile runs in a
fresh process (a second compile of the same program in one process is faster,
whatever its options), the two kinds alternating, `--repeats` times each, the
fastest kept. Then the compiled program is run (median of 5), to show that the
faster-compiling code runs as fast.

    python benchmarks/compile_time.py [--systems pendulum double_pendulum] [--grad]

`--grad` compiles `jax.value_and_grad` of a loss of the trajectory instead.
"""

import argparse
import json
import subprocess
import sys
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

import lagrax as lx  # noqa: E402


FAST = {"xla_cpu_use_fusion_emitters": False}


def program(model, grad: bool):
    """A jitted function of the model's parameters and its argument."""
    q0, qd0 = model.initial_state()
    ts = jnp.linspace(0.0, 1.0, 21)

    def trajectory(params):
        return lx.simulate(model.system, q0, qd0, params, t1=1.0, ts=ts, throw=False)

    def outputs(params):
        sol = trajectory(params)
        return [x for x in jax.tree.leaves(sol) if isinstance(x, jax.Array)]

    def loss(params):
        sol = trajectory(params)
        return jnp.sum(sol.q**2) + jnp.sum(sol.multipliers**2)

    params = {k: jnp.asarray(v, dtype=float) for k, v in model.params.items()}
    fn = jax.value_and_grad(loss) if grad else outputs
    return jax.jit(fn), params


def one(name: str, fast: bool, grad: bool) -> dict:
    fn, params = program(lx.systems.get(name), grad)
    start = time.perf_counter()
    lowered = fn.lower(params)
    lowering = time.perf_counter() - start
    start = time.perf_counter()
    compiled = lowered.compile(FAST if fast else None)
    compiling = time.perf_counter() - start
    _, run, _ = timed(lambda: compiled(params), 5)
    return {"lower": lowering, "compile": compiling, "run": run}


def measure(name: str, fast: bool, grad: bool) -> dict:
    """`one` in a fresh process."""
    args = [sys.executable, __file__, "--one", name] + ["--fast"] * fast
    out = subprocess.run(args + ["--grad"] * grad, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", nargs="+", default=sorted(lx.systems.BUILTIN))
    parser.add_argument("--grad", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--fast", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "cpu":
        print(f"the option is for XLA:CPU; this backend is {jax.default_backend()}")
        return
    if args.one:
        print(json.dumps(one(args.one, args.fast, args.grad)))
        return
    kind = "value_and_grad" if args.grad else "forward"
    print(f"{kind} programs: compile time with XLA:CPU's defaults and its loop "
          f"emitters (fastest of {args.repeats}, each in a fresh process)")  # fmt: skip
    print(f"{'system':16s} {'trace+lower':>11s} {'default':>9s} {'loop':>9s} "
          f"{'ratio':>6s} {'run default':>12s} {'run loop':>9s}")  # fmt: skip
    ratios = []
    for name in args.systems:
        runs = {False: [], True: []}
        for k in range(args.repeats):
            for fast in (k % 2 == 1, k % 2 == 0):
                runs[fast].append(measure(name, fast, args.grad))
        default, loop = (
            {key: min(r[key] for r in runs[fast]) for key in runs[fast][0]}
            for fast in (False, True)
        )
        ratios.append(default["compile"] / loop["compile"])
        print(f"{name:16s} {default['lower']:10.2f}s {default['compile']:8.2f}s "
              f"{loop['compile']:8.2f}s {ratios[-1]:5.2f}x "
              f"{1e3 * default['run']:10.2f}ms {1e3 * loop['run']:7.2f}ms",
              flush=True)  # fmt: skip
    mean = np.exp(np.mean(np.log(ratios)))
    print(f"geometric mean: the loop emitters compile {mean:.2f}x faster")


if __name__ == "__main__":
    main()
