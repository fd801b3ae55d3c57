"""Mechanisms from parts: absolute coordinates (`lb.assemble`) against joint
coordinates (`lb.assemble_tree`), side by side in one process.

For the built-in mechanisms built from parts (four-bar, slider-crank) and a chain of
n spatial links on ball joints: coordinates and constraint
rows of each form, trace + compile time and warm time per step of `lx.simulate`
with classical RK4 at a fixed step, and the largest difference of the bodies'
final positions between the two forms (the same motion).

    python benchmarks/tree_assemble.py [--steps 1000] [--links 8]
        [--cases four_bar,slider_crank,chain]
"""

import argparse
import importlib
import sys
import time

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np


jax.config.update("jax_enable_x64", True)


import lagrax as lx  # noqa: E402
import lagrax.bodies as lb  # noqa: E402
import lagrax.systems as ls  # noqa: E402


def _builtin(name, gravity, saddle=None):
    module = importlib.import_module(f"lagrax.systems.{name}")
    model = ls.get(name)
    x, xd = lx.consistent_state(
        model.system, jnp.asarray(model.q_guess), jnp.asarray(model.qd_guess),
        model.params, fixed_q=model.fixed_q, fixed_qd=model.fixed_qd,
    )  # fmt: skip
    loads = getattr(module, "LOADS", ())
    parts = (module.BODIES, module.JOINTS, loads, gravity)
    return (name, *parts, model.params, x, xd, saddle)


def _chain(links):
    """n uniform bars (1 kg, 0.3 m) hanging from the ground on ball joints."""
    bars = [lb.SpatialBody(7 * k, 1.0, (0.0075, 0.0075, 1e-4)) for k in range(links)]
    joints = [lb.Spherical(lb.GROUND_3D, (0.0, 0.0, 0.0), bars[0], (0.0, 0.0, 0.15))]
    joints += [
        lb.Spherical(bars[k], (0.0, 0.0, -0.15), bars[k + 1], (0.0, 0.0, 0.15))
        for k in range(links - 1)
    ]
    tilt = np.array([np.cos(0.2), np.sin(0.2), 0.0, 0.0])  # about x
    x = []
    top = np.zeros(3)
    axis = np.array([0.0, np.sin(0.4), -np.cos(0.4)])
    for _ in range(links):
        centre = top + 0.15 * axis
        x += list(centre) + list(tilt)
        top = top + 0.3 * axis
    x = jnp.asarray(x)
    xd = jnp.zeros_like(x)
    return (
        f"chain of {links} balls", tuple(bars), tuple(joints), (), (0.0, 0.0, -9.81),
        {}, x, xd, None,
    )  # fmt: skip


def run(case, steps, dt):
    name, bodies, joints, loads, gravity, params, x0, xd0, saddle = case
    absolute = lb.assemble(bodies, joints, loads, gravity=gravity)
    tree = lb.assemble_tree(bodies, joints, loads, gravity=gravity)
    q0, qd0 = tree.from_bodies(x0, xd0, params)
    rows = {
        "absolute": lx.mechanics(absolute, 0.0, x0, xd0, params).phi.shape[0],
        "joint": lx.mechanics(tree.system, 0.0, q0, qd0, params).phi.shape[0],
    }
    sizes = {"absolute": x0.shape[0], "joint": q0.shape[0]}
    out = {}
    finals = {}
    for label, system, y0 in (
        ("absolute", absolute, (x0, xd0)),
        ("joint", tree.system, (q0, qd0)),
    ):

        def final(q, qd, params, system=system):
            sol = lx.simulate(
                system, q, qd, params, t1=steps * dt, dt0=dt, solver=lx.RK4(),
                stepsize_controller=dfx.ConstantStepSize(), max_steps=steps + 1,
                saddle_solver=saddle,
            )  # fmt: skip
            return sol.q[-1], sol.qd[-1]

        start = time.perf_counter()
        compiled = jax.jit(final).lower(*y0, params).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(compiled(*y0, params))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            result = jax.block_until_ready(compiled(*y0, params))
            times.append(time.perf_counter() - start)
        out[label] = (compile_s, float(np.median(times)) / steps)
        finals[label] = result
    x_tree = tree.to_bodies(*finals["joint"], params)[0]
    gap = float(jnp.max(jnp.abs(x_tree - finals["absolute"][0])))
    if not gap < 1e-3:  # the two forms' RK4 errors differ, not the motion
        raise AssertionError(f"{name}: the two forms moved apart by {gap:.1e}.")
    (ca, sa), (cj, sj) = out["absolute"], out["joint"]
    print(
        f"| {name} | {sizes['absolute']} / {rows['absolute']} | "
        f"{sizes['joint']} / {rows['joint']} | {ca:.1f} s | {cj:.1f} s | "
        f"{sa * 1e6:.1f} us | {sj * 1e6:.1f} us | {sj / sa:.2f}x | {gap:.1e} |",
        flush=True,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--links", type=int, default=8)
    parser.add_argument("--cases", default="four_bar,slider_crank,chain")
    args = parser.parse_args(argv)
    print(
        f"jax {jax.__version__} on {jax.devices()}; RK4, {args.steps} steps of "
        f"{args.dt:g} s; times are medians of 5 warm runs.\n"
    )
    print(
        "| mechanism | absolute n / rows | joint n / rows | compile absolute | "
        "compile joint | step absolute | step joint | joint / absolute | "
        "max body position gap |"
    )
    print("|---|---|---|---|---|---|---|---|---|")

    def g(p):
        return jnp.stack([0.0, -p["g"]])

    cases = {
        "four_bar": lambda: _builtin("four_bar", g),
        "slider_crank": lambda: _builtin("slider_crank", None),
        "chain": lambda: _chain(args.links),
    }
    for name in args.cases.split(","):
        if name not in cases:
            parser.error(f"--cases: {name!r} is not one of {sorted(cases)}.")
        run(cases[name](), args.steps, args.dt)


if __name__ == "__main__":
    sys.exit(main())
