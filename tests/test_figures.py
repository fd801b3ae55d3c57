"""Figures: constant panels, spring coils, multiplier units, energy labels, and
the constraint-force arrows of every built-in model.

No simulations: the arrows are checked at consistent states against J^T lam
(jax.jacfwd of the constraints, for any lam: the identity is linear) rebuilt
from the drawn forces and the joints' reactions, and against static equilibria
whose forces are known by hand; the figures are drawn from synthetic data.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import lagrax as lx
from lagrax import _plot, bodies as lb
from lagrax.systems.cart_pole import JOINTS as CART_POLE_JOINTS
from lagrax.systems.chain import _parts as chain_parts
from lagrax.systems.four_bar import JOINTS as FOUR_BAR_JOINTS, _guess as four_bar_at
from lagrax.systems.sleigh import SLEIGH, _blade
from lagrax.systems.slider_crank import (
    JOINTS as SLIDER_CRANK_JOINTS,
    _guess as slider_crank_at,
)
from lagrax.systems.top import BODIES as TOP_BODIES, JOINTS as TOP_JOINTS, TOP


def _jt(fn, q, lam):
    """J^T lam with J = jacfwd(fn)(q), compiled (op by op, JAX is slower)."""
    return jax.jit(lambda q_, lam_: jax.jacfwd(fn)(q_).T @ lam_)(q, lam)


def _arrows(model, q, lam, params):
    return jax.jit(model.constraint_forces)(0.0, q, lam, params)


def _lam(m, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=m))


# ---------------------------------------------------------------- constant panels


def test_round_off_coordinate_is_drawn_constant():
    ts = np.linspace(0.0, 10.0, 501)
    rng = np.random.default_rng(1)
    x = 0.3 * np.sin(ts)  # m
    y = 1e-16 * rng.normal(size=ts.size)  # m: a block on a track
    th_block = np.zeros_like(ts)  # rad, exactly
    th_bar = 2.0 * np.cos(ts)  # rad
    small = 0.2 + 1e-6 * np.sin(ts)  # m: a small but real motion
    units = ("m", "m", "rad", "rad", "m")
    run = np.stack([x, y, th_block, th_bar, small], axis=1)
    # A second run with NaN where it failed, and the same zero coordinate.
    other = run[::2].copy()
    other[-10:] = np.nan
    flats = _plot.flat_panels([run, other], units)
    assert flats[0] is None and flats[3] is None and flats[4] is None
    centre, spread, half = flats[1]
    assert centre == 0.0 and 0 < spread < 1e-15
    # The narrowest moving panel of the same unit sets the height: here the
    # 2e-6 m of `small`, so the 1e-16 noise still looks flat (1e-10 of it).
    assert half == pytest.approx(0.55 * np.ptp(small[np.isfinite(small)]))
    assert flats[2] == (0.0, 0.0, pytest.approx(0.55 * 4.0, rel=1e-3))


def test_constant_value_is_kept_and_all_zero_is_flat():
    ts = np.linspace(0.0, 1.0, 11)
    run = np.stack([ts, np.full_like(ts, 0.25), np.zeros_like(ts)], axis=1)
    flats = _plot.flat_panels([run], ("s", "m", "N"))
    assert flats[0] is None
    assert flats[1] == (0.25, 0.0, pytest.approx(0.025))  # 10 % of the value
    assert flats[2] == (0.0, 0.0, 1.0)  # no scale at all: one unit
    assert _plot.flat_panels([np.zeros((5, 2))], ("m", "m")) == [(0.0, 0.0, 1.0)] * 2


# ------------------------------------------------------------------ spring coils


def test_zigzag_spans_the_ends_with_alternate_corners():
    a, b, width = np.array([1.0, 2.0]), np.array([4.0, 6.0]), 0.3
    line = _plot.zigzag(a, b, width, coils=5)
    assert line.shape == (14, 2)
    np.testing.assert_allclose(line[0], a)
    np.testing.assert_allclose(line[-1], b)
    along = np.array([3.0, 4.0]) / 5.0
    across = np.array([-along[1], along[0]])
    s = (line - a) @ along
    off = (line - a) @ across
    assert np.all(np.diff(s) > 0) and s[-1] == pytest.approx(5.0)
    # Straight leads of a tenth of the length, corners width/2 off the line,
    # alternately to either side.
    np.testing.assert_allclose(off[[0, 1, -2, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(off[2:-2]), width / 2)
    assert np.all(np.sign(off[2:-3]) == -np.sign(off[3:-2]))
    np.testing.assert_allclose(s[[1, -2]], [0.5, 4.5])
    # Stretched, the coil keeps its width.
    longer = _plot.zigzag(a, a + 2 * (b - a), width, coils=5)
    np.testing.assert_allclose(np.abs((longer[2:-2] - a) @ across), width / 2)


def test_zigzag_of_coincident_ends_collapses():
    p = np.array([0.5, -0.5])
    line = _plot.zigzag(p, p, 0.1, coils=3)
    assert line.shape == (10, 2)
    np.testing.assert_array_equal(line, np.broadcast_to(p, (10, 2)))


# --------------------------------------------------------------- model fields

UNITS = {
    "pendulum": ("N/m",),  # phi = |q|^2 - l^2: J^T lam = 2 lam q, a force
    "slider_pendulum": ("N", "N m", "N", "N"),
    "double_pendulum": ("N/m", "N/m"),
    "andrews": ("N",) * 6,
    "car_axis": ("N/m", "N/m"),
    "four_bar": ("N",) * 8,
    "n_four_bar": ("N",) * 14,
    "bricard": ("N", "N", "N", "N m", "N m") * 6 + ("J",) * 5,
    "slider_crank": ("N",) * 7 + ("N m",),
    "cart_pole": ("N", "N m", "N", "N"),
    "chain": ("N",) * 10,
    "top": ("N", "N", "N", "J"),
    "sleigh": ("N",),
}
# At the default parameters: motors, pushes and moving constraints do work.
CONSERVATIVE = {
    "pendulum": True,
    "slider_pendulum": True,
    "double_pendulum": True,
    "andrews": False,
    "car_axis": False,
    "four_bar": True,
    "n_four_bar": True,
    "bricard": True,
    "slider_crank": False,
    "cart_pole": False,
    "chain": True,
    "top": True,
    "sleigh": True,
}
SPRINGS = {"slider_pendulum": 1, "car_axis": 2, "andrews": 1}


@pytest.mark.parametrize("name", sorted(lx.systems.BUILTIN))
def test_model_drawing_fields(name):
    model = lx.systems.get(name)
    assert model.multiplier_units == UNITS[name]
    assert len(model.multiplier_units) == len(model.constraint_names)
    assert model.is_conservative() is CONSERVATIVE[name]
    assert len(model.springs) == SPRINGS.get(name, 0)
    assert model.constraint_forces is not None
    q = jnp.asarray(model.q_guess, dtype=float)
    count = model.points(0.0, q, model.params).shape[0]
    pairs = (*model.segments, *model.springs)
    assert all(0 <= i < count for pair in pairs for i in pair)
    assert not set(model.springs) & set(model.segments)  # a spring is no link


def test_conservative_follows_the_parameters():
    damped = lx.systems.get("slider_pendulum")
    assert not damped.is_conservative({**damped.params, "c": 0.3})
    crank = lx.systems.get("slider_crank")
    assert crank.is_conservative({**crank.params, "tau0": 0.0, "c": 0.0})
    assert lx.systems.get("cart_pole").is_conservative(
        {**lx.systems.get("cart_pole").params, "F0": 0.0}
    )


def _user_model(lagrangian, constraints=None, forces=None):
    return lx.systems.Model(
        name="user",
        description="a user's factory",
        system=lx.System(lagrangian, constraints, forces),
        params={"k": 2.0},
        coordinates=("x", "y"),
        units=("m", "m"),
        constraint_names=("c",) if constraints else (),
        q_guess=(1.0, 0.0),
        qd_guess=(0.0, 1.0),
    )


def test_conservative_derived_for_user_models():
    def lagrangian(t, q, qd, p):
        return 0.5 * qd @ qd - 0.5 * p["k"] * q @ q

    def circle(t, q, p):
        return jnp.stack([q @ q - 1.0])

    def moving(t, q, p):
        return jnp.stack([q[0] - jnp.sin(t)])

    def pushed(t, q, qd, p):
        return jnp.stack([jnp.cos(t), 0.0])

    def ramped(t, q, qd, p):
        return lagrangian(t, q, qd, p) * (1 + t)

    assert _user_model(lagrangian).is_conservative()
    assert _user_model(lagrangian, circle).is_conservative()
    assert not _user_model(lagrangian, moving).is_conservative()
    assert not _user_model(lagrangian, circle, pushed).is_conservative()
    assert not _user_model(ramped).is_conservative()
    # Built-ins derive the same where no parameter switches a force off.
    for name in ("pendulum", "four_bar", "top", "sleigh", "car_axis", "andrews"):
        model = lx.systems.get(name)
        derived = dataclasses.replace(model, conservative=None)
        assert derived.is_conservative() is CONSERVATIVE[name], name


# ------------------------------------------- arrows against J^T lam (independent)


def _check_bodies_model(model, q, joints, params):
    """Rebuild J^T lam from the drawn forces: each arrow acts on the joint's body
    b at its point, minus it on a; a slider's angle row is a pure torque."""
    constraints = model.system.constraints
    m = len(model.constraint_names)
    lam = _lam(m)
    where, forces = _arrows(model, q, lam, params)
    assert where.shape == forces.shape == (len(joints), 2)
    rebuilt = jnp.zeros_like(q)
    start = 0
    for i, joint in enumerate(joints):
        rows = lam[start : start + len(joint.labels)]
        start += len(joint.labels)
        pb = lambda q_, j=joint: j.b.position(q_, params, j.point_b)  # noqa: E731
        np.testing.assert_allclose(where[i], pb(q), atol=1e-14)
        rebuilt += _jt(pb, q, forces[i])
        if isinstance(joint.a, lb.PlanarBody):
            pa = lambda q_, j=joint: j.a.position(q_, params, j.point_a)  # noqa: E731
            rebuilt -= _jt(pa, q, forces[i])
        if isinstance(joint, lb.Prismatic):
            assert joint.a is lb.GROUND
            rebuilt = rebuilt.at[joint.b.index + 2].add(rows[1])
    expected = _jt(lambda q_: constraints(0.0, q_, params), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-12, atol=1e-12)
    return where, forces


def test_four_bar_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("four_bar")
    q = jnp.asarray(four_bar_at(model.params, 1.1))  # closed-form positions
    phi = model.system.constraints(0.0, q, model.params)
    assert float(jnp.abs(phi).max()) < 1e-14
    _check_bodies_model(model, q, FOUR_BAR_JOINTS, model.params)


def test_slider_crank_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("slider_crank")
    q = jnp.asarray(slider_crank_at(model.params, 2.0))
    assert float(jnp.abs(model.system.constraints(0.0, q, model.params)).max()) < 1e-14
    where, forces = _check_bodies_model(model, q, SLIDER_CRANK_JOINTS, model.params)
    # The cylinder pushes the piston across its axis only.
    assert float(forces[3, 0]) == 0.0


def test_cart_pole_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("cart_pole")
    l, th = model.params["l"], 0.4
    q = jnp.asarray([0.3, 0.0, 0.0, 0.3 - l * math.sin(th), l * math.cos(th), th])
    assert float(jnp.abs(model.system.constraints(0.0, q, model.params)).max()) < 1e-15
    _check_bodies_model(model, q, CART_POLE_JOINTS, model.params)


def test_chain_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("chain")
    q = jnp.asarray(model.q_guess)  # a straight chain: consistent
    _check_bodies_model(model, q, chain_parts(5)[1], model.params)


def test_top_arrows_are_the_ball_joint_force_in_the_drawing():
    model = lx.systems.get("top")
    p = model.params
    q = jnp.asarray(model.q_guess)
    lam = _lam(4)
    where3, forces3 = jax.jit(lb.joint_forces(TOP_BODIES, TOP_JOINTS))(0.0, q, lam, p)
    # J^T lam = J_pivot^T F + the unit-quaternion row's 2 e lam_e.
    below = jnp.array([0.0, 0.0, -p["h"]])
    pivot = lambda q_: TOP.position(q_, p, below)  # noqa: E731
    rebuilt = _jt(pivot, q, forces3[0]) + jnp.zeros(7).at[3:].set(2 * q[3:] * lam[3])
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(where3[0], 0.0, atol=1e-15)
    # Drawn in the cabinet projection of the points: (x + 0.35 y, z + 0.35 y).
    view = jnp.array([[1.0, 0.35, 0.0], [0.0, 0.35, 1.0]])
    where, forces = _arrows(model, q, lam, p)
    np.testing.assert_allclose(forces[0], view @ forces3[0], rtol=1e-14)
    np.testing.assert_allclose(where[0], model.points(0.0, q, p)[0], atol=1e-15)


def test_sleigh_arrow_is_across_the_blade_at_the_blade():
    model = lx.systems.get("sleigh")
    p = model.params
    q = jnp.asarray([0.3, -0.2, 0.7])
    mu = _lam(1)
    where, forces = _arrows(model, q, mu, p)
    blade = SLEIGH.position(q, p, _blade)
    np.testing.assert_allclose(where[0], blade, atol=1e-15)
    # Perpendicular to the blade (the body x axis) ...
    assert abs(float(forces[0] @ jnp.array([math.cos(0.7), math.sin(0.7)]))) < 1e-15
    # ... and A^T mu (A = d psi / d qd) is that force's generalized force.
    psi = lambda qd: model.system.velocity_constraints(0.0, q, qd, p)  # noqa: E731
    expected = _jt(psi, jnp.zeros(3), mu)
    at_blade = lambda q_: SLEIGH.position(q_, p, _blade)  # noqa: E731
    np.testing.assert_allclose(_jt(at_blade, q, forces[0]), expected, rtol=1e-13)


def test_pendulum_arrow_rebuilds_the_constraint_force():
    model = lx.systems.get("pendulum")
    p = model.params
    q = jnp.asarray([1.5, -2.0])  # |q| = l = 2.5
    lam = _lam(1)
    where, forces = _arrows(model, q, lam, p)
    np.testing.assert_allclose(where[0], q)
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(forces[0], expected, rtol=1e-14)


def test_double_pendulum_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("double_pendulum")
    p = model.params
    q = jnp.asarray([1.2, -1.6, 2.0, 0.0])  # |link| = l = 2
    lam = _lam(2)
    where, forces = _arrows(model, q, lam, p)
    tip1 = lambda q_: q_[:2]  # noqa: E731
    tip2 = lambda q_: q_[:2] + q_[2:]  # noqa: E731
    np.testing.assert_allclose(where, jnp.stack([tip1(q), tip2(q)]))
    # Rod 1 pulls tip 1; rod 2 pulls tip 2 and, reacting, tip 1.
    rebuilt = _jt(tip1, q, forces[0]) + _jt(tip2, q, forces[1])
    rebuilt -= _jt(tip1, q, forces[1])
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-13)


def test_car_axis_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("car_axis")
    p = model.params
    q = jnp.asarray(model.q_guess)
    lam = _lam(2)
    where, forces = _arrows(model, q, lam, p)
    left = lambda q_: q_[:2]  # noqa: E731
    right = lambda q_: q_[2:]  # noqa: E731
    np.testing.assert_allclose(where, jnp.stack([left(q), right(q)]))
    rebuilt = _jt(left, q, forces[0]) + _jt(right, q, forces[1])
    rebuilt -= _jt(left, q, forces[1])
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-13, atol=1e-15)


def test_slider_pendulum_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("slider_pendulum")
    p = model.params
    half, th2 = p["L"] / 2, -0.6
    q = jnp.asarray(
        [0.1, 0.0, 0.0, 0.1 + half * math.cos(th2), half * math.sin(th2), th2]
    )
    lam = _lam(4)
    where, forces = _arrows(model, q, lam, p)
    block = lambda q_: q_[:2]  # noqa: E731
    bar_end = lambda q_: (
        q_[3:5]
        - half
        * jnp.stack(  # noqa: E731
            [jnp.cos(q_[5]), jnp.sin(q_[5])]
        )
    )
    np.testing.assert_allclose(where, jnp.stack([block(q), bar_end(q)]), atol=1e-15)
    # Track force on the block, its moment (not drawn), pin force on the bar
    # and its reaction on the block.
    rebuilt = _jt(block, q, forces[0]) + jnp.zeros(6).at[2].set(lam[1])
    rebuilt += _jt(bar_end, q, forces[1]) - _jt(block, q, forces[1])
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-13, atol=1e-15)


def test_andrews_arrows_rebuild_the_constraint_force():
    model = lx.systems.get("andrews")
    p = model.params
    q = jnp.asarray(model.q_guess)
    lam = _lam(6)
    where, forces = _arrows(model, q, lam, p)

    def crank_side(q_):  # the joint E from the crank (beta, theta)
        be, th = q_[0], q_[1]
        return jnp.stack(
            [
                p["rr"] * jnp.cos(be) - p["d"] * jnp.cos(be + th),
                p["rr"] * jnp.sin(be) - p["d"] * jnp.sin(be + th),
            ]
        )

    def arms(q_):  # E reached from B (gamma) and from A (phi, delta; Omega, eps)
        _, _, ga, ph, de, om, ep = q_
        return [
            jnp.stack(
                [p["xb"] + p["ss"] * jnp.sin(ga), p["yb"] - p["ss"] * jnp.cos(ga)]
            ),
            jnp.stack(
                [
                    p["xa"] + p["e"] * jnp.sin(ph + de) + p["zt"] * jnp.cos(de),
                    p["ya"] - p["e"] * jnp.cos(ph + de) + p["zt"] * jnp.sin(de),
                ]
            ),
            jnp.stack(
                [
                    p["xa"] + p["zf"] * jnp.cos(om + ep) + p["u"] * jnp.sin(ep),
                    p["ya"] + p["zf"] * jnp.sin(om + ep) - p["u"] * jnp.cos(ep),
                ]
            ),
        ]

    rebuilt = jnp.zeros(7)
    for k in range(3):
        np.testing.assert_allclose(where[k], crank_side(q), atol=1e-12)
        np.testing.assert_allclose(arms(q)[k], crank_side(q), atol=1e-12)
        rebuilt += _jt(lambda q_, k=k: arms(q_)[k], q, forces[k])
        rebuilt -= _jt(crank_side, q, forces[k])
    expected = _jt(lambda q_: model.system.constraints(0.0, q_, p), q, lam)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-12, atol=1e-12)


# ------------------------------------------------ static equilibria (by hand)


def _static_multipliers(model, q, params):
    """lam with J^T lam = -dL/dq at rest (qd = qdd = 0), by least squares."""

    @jax.jit
    def terms(q_):
        rest = jnp.zeros_like(q_)
        f = jax.grad(lambda r: model.system.lagrangian(0.0, r, rest, params))(q_)
        return f, jax.jacfwd(lambda r: model.system.constraints(0.0, r, params))(q_)

    f, jac = terms(q)
    lam, *_ = np.linalg.lstsq(np.asarray(jac.T), -np.asarray(f), rcond=None)
    np.testing.assert_allclose(jac.T @ lam, -f, atol=1e-12)  # an equilibrium
    return jnp.asarray(lam)


def test_hanging_chain_pins_carry_the_weight_below():
    n = 3
    model = lx.systems.chain(n)
    p = model.params
    l, m, g = p["l"], p["m"], p["g"]
    q = jnp.asarray([c for k in range(n) for c in (0.0, -(k + 0.5) * l, 0.0)])
    lam = _static_multipliers(model, q, p)
    where, forces = _arrows(model, q, lam, p)
    for k in range(n):  # pin k holds links k .. n-1 up, at link k's upper end
        np.testing.assert_allclose(where[k], [0.0, -k * l], atol=1e-15)
        np.testing.assert_allclose(forces[k], [0.0, (n - k) * m * g], atol=1e-12)


def test_slider_pendulum_at_rest_track_and_pin_carry_the_weights():
    model = lx.systems.get("slider_pendulum")
    p = model.params
    half = p["L"] / 2
    q = jnp.asarray([0.0, 0.0, 0.0, 0.0, -half, -math.pi / 2])  # bar hangs down
    lam = _static_multipliers(model, q, p)
    where, forces = _arrows(model, q, lam, p)
    g = p["g"]
    np.testing.assert_allclose(forces[0], [0.0, (p["m1"] + p["m2"]) * g], atol=1e-12)
    np.testing.assert_allclose(forces[1], [0.0, p["m2"] * g], atol=1e-12)
    np.testing.assert_allclose(where, 0.0, atol=1e-15)


def test_upright_top_at_rest_is_held_up_by_its_weight():
    model = lx.systems.get("top")
    p = model.params
    q = jnp.asarray([0.0, 0.0, p["h"], 1.0, 0.0, 0.0, 0.0])
    lam = _static_multipliers(model, q, p)
    where, forces = _arrows(model, q, lam, p)
    np.testing.assert_allclose(forces[0], [0.0, p["m"] * p["g"]], atol=1e-12)
    np.testing.assert_allclose(where[0], 0.0, atol=1e-15)


# ------------------------------------------------------------ figures written


def _synthetic_runs(model, labels_params):
    """Runs of the slider pendulum's shape, from made-up smooth motions."""
    ts = np.linspace(0.0, 2.0, 41)
    x1 = 0.1 * np.sin(3 * ts)
    th2 = -1.0 + 0.5 * np.cos(2 * ts)
    half = model.params["L"] / 2
    q = np.stack(
        [x1, 1e-16 * np.sin(40 * ts), 0 * ts, x1 + half * np.cos(th2),
         half * np.sin(th2), th2], axis=1,
    )  # fmt: skip
    runs = {}
    for label, params in labels_params.items():
        lam = np.stack([2 + np.sin(ts), 0 * ts, np.cos(ts), -1 + 0 * ts], axis=1)
        runs[label] = {
            "ts": ts, "q": q, "qd": np.gradient(q, ts, axis=0),
            "qdd": np.gradient(np.gradient(q, ts, axis=0), ts, axis=0),
            "multipliers": lam, "phi": 1e-12 * np.ones((ts.size, 4)),
            "phi_dot": np.zeros((ts.size, 4)), "energy": 0.1 - 0.02 * ts,
            "params": params,
        }  # fmt: skip
    return runs


@pytest.fixture
def captured(monkeypatch):
    """The axes of every figure as it is saved."""
    seen = {}
    finish = _plot._finish

    def spy(fig, axes, path, legend):
        seen[path.name] = [
            {
                "title": ax.get_title(),
                "ylabel": ax.get_ylabel(),
                "ylim": ax.get_ylim(),
                "texts": [t.get_text() for t in ax.texts],
            }
            for ax in axes
        ]
        seen[path.name + ":suptitle"] = fig._suptitle.get_text()
        finish(fig, axes, path, legend)

    monkeypatch.setattr(_plot, "_finish", spy)
    return seen


def test_figures_are_written_and_labelled(tmp_path, captured):
    model = lx.systems.get("slider_pendulum")
    runs = _synthetic_runs(
        model, {"undamped": model.params, "damped": {**model.params, "c": 0.2}}
    )
    _plot.coordinates(model, runs, "positions", tmp_path / "positions.png", "test")
    _plot.multipliers(model, runs, tmp_path / "multipliers.png", "test")
    _plot.energy(model, runs, tmp_path / "energy.png", "test")
    for name in ("positions", "multipliers", "energy"):
        assert Image.open(tmp_path / f"{name}.png").size[0] > 500

    positions = captured["positions.png"]
    y1, th1, x1 = positions[1], positions[2], positions[0]
    assert y1["texts"] == ["constant 0 m (varies by 2e-16)"]
    assert th1["texts"] == ["constant 0 rad (exactly)"]
    assert x1["texts"] == []
    assert y1["ylim"][1] == pytest.approx(-y1["ylim"][0]) and y1["ylim"][1] > 0.01
    labels = [panel["ylabel"] for panel in captured["multipliers.png"]]
    assert labels == [
        "λ  (track y1)  [N]", "λ  (track th1)  [N m]", "λ  (pin x)  [N]",
        "λ  (pin y)  [N]",
    ]  # fmt: skip
    assert captured["multipliers.png"][3]["texts"] == ["constant -1 N (exactly)"]
    # One run is damped: the change is drift or work, and E is not claimed
    # constant.
    right = captured["energy.png"][1]
    assert "work" in right["title"]
    assert "conservative only in some runs" in captured["energy.png:suptitle"]


@pytest.mark.parametrize(
    ("name", "params", "title", "claim"),
    [
        ("pendulum", {}, "numerical drift", "constant up to numerical drift"),
        ("slider_crank", {}, "work done by the forces and drives", "not conservative"),
        ("slider_pendulum", {"c": 0.5}, "work done by", "not conservative"),
    ],
)
def test_energy_change_is_drift_only_when_conservative(
    tmp_path, captured, name, params, title, claim
):
    model = lx.systems.get(name)
    ts = np.linspace(0.0, 1.0, 11)
    runs = {"run": {"ts": ts, "energy": 1 + ts, "params": {**model.params, **params}}}
    _plot.energy(model, runs, tmp_path / "energy.png", name)
    assert captured["energy.png"][1]["title"].startswith(title)
    assert claim in captured["energy.png:suptitle"]
    if claim == "not conservative":
        assert "drift" not in captured["energy.png"][1]["title"]
        assert captured["energy.png"][1]["ylabel"].startswith("W(t)")


def test_animation_draws_springs_as_coils(tmp_path, monkeypatch):
    model = lx.systems.get("slider_pendulum")
    frames = 4
    points = np.zeros((frames, 3, 2))
    points[:, 0] = [-0.4, 0.0]  # the anchor
    points[:, 1, 0] = np.linspace(-0.1, 0.1, frames)  # the block
    points[:, 2] = points[:, 1] + [0.0, -0.4]  # the bar's tip
    forces = np.zeros((frames, 2, 2))
    forces[:, :, 1] = 3.0
    run = {
        "frame_ts": np.linspace(0.0, 1.0, frames), "points": points,
        "trail_ts": np.linspace(0.0, 1.0, 9), "trail": np.zeros((9, 2)),
        "force_points": points[:, [1, 1]], "forces": forces,
    }  # fmt: skip
    drawn = []
    zigzag = _plot.zigzag

    def spy(a, b, width, coils=6):
        drawn.append((np.array(a), np.array(b), width))
        return zigzag(a, b, width, coils)

    monkeypatch.setattr(_plot, "zigzag", spy)
    _plot.animate(model, {"one": run}, tmp_path / "a.gif", "test", fps=10)
    gif = Image.open(tmp_path / "a.gif")
    assert gif.n_frames == frames
    # Every frame draws the spring from the anchor to the block, one width.
    assert len(drawn) >= frames
    for a, b, width in drawn:
        np.testing.assert_allclose(a, [-0.4, 0.0])
        assert b[1] == 0.0 and -0.1 <= b[0] <= 0.1
        assert width == pytest.approx(0.06 * 0.5)  # 6 % of the drawing's size
