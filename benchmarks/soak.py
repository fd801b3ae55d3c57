"""Soak: 10^6 steps of the pendulum with projection.

Dopri8 with a fixed step dt = 0.01 (10^4 s of motion, about 3000 periods) and
the default Projection stabilization, saving 2001 states. Reports the largest
|phi| and |phi_dot| over the run, and the energy error: its largest value, and
its growth, the slope of a least-squares line through |E(t) - E(0)| against
t, over the whole run. A bounded error shows as a largest value at round-off
level that the first and second halves of the run share; a drifting one as
a second half whose error is about twice the first's.

    python benchmarks/soak.py [--steps 1000000]
"""

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagrax as lx  # noqa: E402


DT = 0.01


def soak(steps, saves=2001):
    model = lx.systems.pendulum()
    q0, qd0 = model.initial_state()
    t1 = steps * DT
    start = time.perf_counter()
    sol = lx.simulate(model.system, q0, qd0, model.params, t1=t1,
                      ts=jnp.linspace(0.0, t1, saves), dt0=DT,
                      stepsize_controller=dfx.ConstantStepSize(),
                      max_steps=steps + 10)  # fmt: skip
    jax.block_until_ready(sol.q)
    elapsed = time.perf_counter() - start
    error = np.abs(np.asarray(sol.energy) - float(sol.energy[0]))
    scale = abs(float(sol.energy[0])) or 1.0
    half = saves // 2
    return {
        "steps": int(sol.stats["num_steps"]),
        "seconds": elapsed,
        "max_phi": float(jnp.max(jnp.abs(sol.phi))),
        "max_phi_dot": float(jnp.max(jnp.abs(sol.phi_dot))),
        "energy_error_first_half": float(error[:half].max()) / scale,
        "energy_error_second_half": float(error[half:].max()) / scale,
        "energy_slope_per_second": float(np.polyfit(np.asarray(sol.ts), error, 1)[0])
        / scale,
        "result": str(sol.result),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    args = parser.parse_args()
    report = soak(args.steps)
    for key, value in report.items():
        print(f"{key:28s} {value:.3e}" if isinstance(value, float) else
              f"{key:28s} {value}")  # fmt: skip


if __name__ == "__main__":
    main()
