"""Mechanisms from parts in joint coordinates (`lb.assemble_tree`) against the
same parts in absolute coordinates (`lb.assemble`: every joint a set of
constraint rows), against the four-bar's closed-form position analysis, and
the block-diagonal mass matrix of `assemble` against autodiff of the whole
Lagrangian."""

import importlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx
import lagrax.bodies as lb
import lagrax.systems as ls
from lagrax._mechanics import lagrangian_terms


FOUR_BAR = importlib.import_module("lagrax.systems.four_bar")
SLIDER_CRANK = importlib.import_module("lagrax.systems.slider_crank")


def _spatial_parts():
    """A ball to the ground, a hinge given child-first, a slider, a weld, a
    loop closed by a ball to the ground, and a free body on a spring."""
    a = lb.SpatialBody(0, "mA", (0.02, 0.03, 0.04))
    b = lb.SpatialBody(7, 1.5, lambda p: jnp.array([0.05, 0.02, 0.06]) * p["s"])
    c = lb.SpatialBody(14, 0.7, (0.01, 0.01, 0.02))
    e = lb.SpatialBody(21, 0.9, (0.03, 0.02, 0.01))
    free = lb.SpatialBody(28, 0.4, (0.01, 0.02, 0.02))
    joints = (
        lb.Spherical(lb.GROUND_3D, (0.0, 0.0, 0.0), a, (0.0, 0.0, 0.3), name="ball"),
        lb.Hinge(b, (0.0, 0.2, 0.0), a, (0.0, 0.0, -0.3), (1.0, 0.0, 0.0),
                 (0.0, 1.0, 1.0), name="elbow"),
        lb.SpatialPrismatic(b, c, (0.0, 1.0, 0.0), (0.0, -0.1, 0.0), name="slide"),
        lb.Weld(c, (0.1, 0.0, 0.0), e, (0.0, 0.0, 0.1), name="weld"),
        lb.Spherical(e, (0.2, 0.0, 0.0), lb.GROUND_3D, (0.3, 0.3, -0.5), name="end"),
    )  # fmt: skip
    loads = (
        lb.Spring(b, (0.0, -0.2, 0.0), free, None, "k", 0.4),
        lb.Damper(a, None, free, None, 0.3),
    )
    params = {"mA": 1.2, "s": 1.0, "k": 30.0}
    return (a, b, c, e, free), joints, loads, params


def _random_joint_state(tree, rng):
    n = tree.map.n
    q, qd = rng.normal(size=n), rng.normal(size=n)
    for s in tree.map.quaternions:
        q[s : s + 4] /= np.linalg.norm(q[s : s + 4])
        qd[s : s + 4] -= (qd[s : s + 4] @ q[s : s + 4]) * q[s : s + 4]
    return jnp.asarray(q), jnp.asarray(qd)


@eqx.filter_jit
def _both(absolute, tree, q, qd, params):
    """Accelerations, multipliers and energies of both models at the same
    motion, the bodies' accelerations from the joint coordinates' ones, and
    the joint coordinates recovered from the bodies'."""
    x, xd = tree.to_bodies(q, qd, params)
    xdd, lam = lx.accelerations(absolute, 0.0, x, xd, params)
    qdd, mu = lx.accelerations(tree.system, 0.0, q, qd, params)

    def place(q_):
        return tree.map(q_, params)

    def rate(q_):
        return jax.jvp(place, (q_,), (qd,))[1]

    xdd_tree = jax.jacfwd(place)(q) @ qdd + jax.jvp(rate, (q,), (qd,))[1]
    energies = (
        lx.energy(tree.system, 0.0, q, qd, params),
        lx.energy(absolute, 0.0, x, xd, params),
    )
    return (xdd, lam), (xdd_tree, mu), energies, tree.from_bodies(x, xd, params)


def _row_offsets(joints):
    return np.cumsum([0] + [len(j.labels) for j in joints])


def _check_against_absolute(parts, gravity, q, qd, tree, params):
    """At joint coordinates (q, qd): the bodies' accelerations equal those of
    the absolute model, the loop joints' multipliers equal its multipliers of
    the same joints, and the energies agree."""
    bodies, joints, loads = parts
    absolute = lb.assemble(bodies, joints, loads, gravity=gravity)
    (xdd, lam), (xdd_tree, mu), energies, back = _both(absolute, tree, q, qd, params)
    np.testing.assert_allclose(xdd_tree, xdd, atol=1e-11 * (1 + np.abs(xdd).max()))
    offsets = _row_offsets(joints)
    rows = np.concatenate(
        [np.arange(offsets[j], offsets[j + 1]) for j in tree.loop_joints]
    ).astype(int)
    np.testing.assert_allclose(
        mu[: rows.size], lam[rows], atol=1e-10 * (1 + np.abs(lam).max())
    )
    np.testing.assert_allclose(*energies, rtol=1e-13)
    np.testing.assert_allclose(back[0], q, atol=1e-12)
    np.testing.assert_allclose(back[1], qd, atol=1e-12)


def test_spatial_parts_move_as_in_absolute_coordinates():
    bodies, joints, loads, params = _spatial_parts()
    gravity = (0.0, 0.0, -9.81)
    tree = lb.assemble_tree(bodies, joints, loads, gravity=gravity)
    # The tree: ball, weld ... from the ground, the free body on its own; the
    # joint left over closes the loop.
    assert len(tree.loop_joints) == 1
    assert tree.map.n == 4 + 4 + 1 + 7  # two balls, the elbow, the free body
    assert tree.constraint_labels[-3:] == ("|e|=1 ball", "|e|=1 end", "|e|=1 body 4")
    q, qd = _random_joint_state(tree, np.random.default_rng(0))
    _check_against_absolute((bodies, joints, loads), gravity, q, qd, tree, params)


def test_slider_crank_with_loads_moves_as_in_absolute_coordinates():
    model = ls.get("slider_crank")
    parts = (SLIDER_CRANK.BODIES, SLIDER_CRANK.JOINTS, SLIDER_CRANK.LOADS)
    tree = lb.assemble_tree(*parts)
    assert tree.map.n == 3 and len(tree.loop_joints) == 1
    x, xd = lx.consistent_state(
        model.system, jnp.asarray(model.q_guess), jnp.asarray(model.qd_guess),
        model.params, fixed_q=model.fixed_q, fixed_qd=model.fixed_qd,
    )  # fmt: skip
    q, qd = tree.from_bodies(x, xd, model.params)
    _check_against_absolute(parts, None, q, qd, tree, model.params)


@pytest.fixture(scope="module")
def four_bar():
    model = ls.get("four_bar")

    def gravity(p):
        return jnp.stack([0.0, -p["g"]])

    tree = lb.assemble_tree(FOUR_BAR.BODIES, FOUR_BAR.JOINTS, gravity=gravity)
    x, xd = lx.consistent_state(
        model.system, jnp.asarray(model.q_guess), jnp.asarray(model.qd_guess),
        model.params, fixed_q=model.fixed_q, fixed_qd=model.fixed_qd,
    )  # fmt: skip
    q, qd = tree.from_bodies(x, xd, model.params)
    return model, tree, gravity, q, qd


def test_four_bar_in_joint_coordinates_follows_the_closed_form_positions(four_bar):
    model, tree, gravity, q0, qd0 = four_bar
    # Three angles (crank, rocker, coupler), one loop (the pin B): two rows.
    assert tree.coordinates == ("O2", "O4", "A")
    assert tree.constraint_labels == ("B x", "B y")
    sol = lx.simulate(
        tree.system, q0, qd0, model.params, t1=0.5, ts=jnp.linspace(0.0, 0.5, 11),
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    assert sol.result == lx.RESULTS.successful
    # The relative angles give the absolute ones: crank th2 = O2, rocker th4 =
    # O4, coupler th3 = O2 + A; Freudenstein's closed form gives th3, th4 of th2.
    for q in np.asarray(sol.q):
        th3, th4 = FOUR_BAR.positions(float(q[0]), model.params)
        assert abs(np.angle(np.exp(1j * (q[0] + q[2] - th3)))) < 1e-8
        assert abs(np.angle(np.exp(1j * (q[1] - th4)))) < 1e-8
    np.testing.assert_allclose(sol.energy, sol.energy[0], atol=1e-8)
    np.testing.assert_allclose(sol.phi, 0.0, atol=1e-10)
    parts = (FOUR_BAR.BODIES, FOUR_BAR.JOINTS, ())
    _check_against_absolute(parts, gravity, sol.q[-1], sol.qd[-1], tree, model.params)


def test_gradient_through_joint_coordinates_equals_finite_differences(four_bar):
    model, tree, _, q0, qd0 = four_bar

    def crank_acceleration(m2):
        params = {**model.params, "m2": m2}
        qdd, lam = lx.accelerations(tree.system, 0.0, q0, qd0, params)
        return qdd[0] + 1e-3 * lam[0]

    m2 = jnp.asarray(model.params["m2"])
    grad = jax.jit(jax.grad(crank_acceleration))(m2)
    h = 1e-5
    central = (crank_acceleration(m2 + h) - crank_acceleration(m2 - h)) / (2 * h)
    np.testing.assert_allclose(grad, central, rtol=1e-7)
    batch = jax.vmap(crank_acceleration)(m2 * jnp.array([0.5, 1.0, 2.0]))
    np.testing.assert_allclose(batch[1], crank_acceleration(m2), rtol=1e-12)


def test_assemble_tree_refuses_a_joint_of_the_other_dimension():
    bodies = FOUR_BAR.BODIES
    hinge = lb.Hinge(bodies[0], None, bodies[1], None, (0, 0, 1.0), (0, 0, 1.0),
                     name="wrong")  # fmt: skip
    with pytest.raises(TypeError, match="Hinge .'wrong'. is a spatial joint"):
        lb.assemble_tree(bodies, (*FOUR_BAR.JOINTS, hinge))


class _Plain(eqx.Module):
    """A Lagrangian as a plain function: autodiff of the whole of it."""

    lagrangian: lx.AbstractLagrangian

    def __call__(self, t, q, qd, params):
        return self.lagrangian(t, q, qd, params)


@pytest.mark.parametrize("name", ["n_four_bar", "slider_crank", "top"])
def test_assembled_mass_matrix_is_block_diagonal_and_equals_autodiff(name):
    model = ls.get(name)
    lagrangian = model.system.lagrangian
    assert isinstance(lagrangian, lx.AbstractLagrangian)
    rng = np.random.default_rng(3)
    n = len(model.q_guess)
    q = jnp.asarray(model.q_guess) + 0.1 * rng.normal(size=n)
    qd = jnp.asarray(rng.normal(size=n))
    terms = eqx.filter_jit(lagrangian_terms)
    mass, force = terms(lagrangian, 0.2, q, qd, model.params)
    mass_ad, force_ad = terms(_Plain(lagrangian), 0.2, q, qd, model.params)
    np.testing.assert_allclose(mass, mass_ad, atol=1e-13)
    np.testing.assert_allclose(
        force, force_ad, atol=1e-12 * (1 + np.abs(force_ad).max())
    )


def _chain_of(kind, flip_first, flip_second):
    """Ground -> A -> B by two joints of one kind, each given parent first or
    child first, with random points, axes and fixed turns."""
    rng = np.random.default_rng(7)

    def vec(n):
        return tuple(float(v) for v in rng.normal(size=n))

    if kind in ("revolute", "prismatic", "fixed"):
        a, b, ground = lb.PlanarBody(0, 1.0, 0.1), lb.PlanarBody(3, 1.0, 0.2), lb.GROUND

        def joint(p, c):
            if kind == "revolute":
                return lb.Revolute(p, vec(2), c, vec(2))
            if kind == "prismatic":
                return lb.Prismatic(p, c, vec(2), vec(2), vec(2), angle=0.7)
            return lb.Fixed(p, vec(2), c, vec(2), angle=0.4)

    else:
        a = lb.SpatialBody(0, 1.0, (0.1, 0.2, 0.3))
        b = lb.SpatialBody(7, 1.0, (0.2, 0.1, 0.3))
        ground = lb.GROUND_3D
        turn = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        turn = turn * np.sign(np.linalg.det(turn))  # a rotation

        def joint(p, c):
            if kind == "ball":
                return lb.Spherical(p, vec(3), c, vec(3))
            if kind == "hinge":
                return lb.Hinge(p, vec(3), c, vec(3), vec(3), vec(3))
            if kind == "slider":
                return lb.SpatialPrismatic(p, c, vec(3), vec(3), vec(3), turn)
            return lb.Weld(p, vec(3), c, vec(3), turn)

    first = joint(a, ground) if flip_first else joint(ground, a)
    second = joint(b, a) if flip_second else joint(a, b)
    return (a, b), (first, second)


@pytest.mark.parametrize(
    "kind", ["revolute", "prismatic", "fixed", "ball", "hinge", "slider", "weld"]
)
def test_every_tree_joint_holds_exactly_either_way_round(kind):
    """The map puts the bodies where each joint's own rows (lb.assemble's)
    vanish, for a joint named parent first or child first, and `from_bodies`
    gives back the joint values."""
    for flips in ((False, True), (True, False)):
        bodies, joints = _chain_of(kind, *flips)
        tree = lb.assemble_tree(bodies, joints)
        assert tree.loop_joints == ()
        q, qd = _random_joint_state(tree, np.random.default_rng(1))
        x, xd = eqx.filter_jit(tree.to_bodies)(q, qd, {})
        rows = jnp.concatenate([jnp.atleast_1d(j(0.0, x, {})) for j in joints])
        np.testing.assert_allclose(rows, 0.0, atol=1e-13)
        if tree.map.n:
            q_back, qd_back = eqx.filter_jit(tree.from_bodies)(x, xd, {})
            x_back = tree.map(q_back, {})
            np.testing.assert_allclose(x_back, x, atol=1e-13)


def test_from_bodies_refuses_bodies_the_tree_cannot_give():
    """A hinge's rows hold with its axes opposite, half a turn from where the
    tree measures its angle: refused by name, not mapped elsewhere."""
    body = lb.SpatialBody(0, 1.0, (0.1, 0.2, 0.3))
    z = (0.0, 0.0, 1.0)
    hinge = lb.Hinge(lb.GROUND_3D, (0.0, 0.0, 0.0), body, (0.0, 0.0, 0.5), z, z)
    tree = lb.assemble_tree([body], [hinge])
    x = jnp.array([0.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0])  # turned about x
    np.testing.assert_allclose(hinge(0.0, x, {}), 0.0, atol=1e-15)
    with pytest.raises(Exception, match="from_bodies: the tree's joints do not"):
        tree.from_bodies(x, jnp.zeros(7), {})


def test_ball_turning_a_point_mass_keeps_mass_matrix_positive_definite():
    point = lb.SpatialBody(0, 1.0, (0.0, 0.0, 0.0))
    weight = lb.SpatialBody(7, 1.0, (0.1, 0.2, 0.3))
    joints = [
        lb.Spherical(lb.GROUND_3D, None, point, (0.0, 0.0, 0.5)),
        lb.Weld(point, None, weight, (0.0, 0.0, 0.2)),
    ]
    tree = lb.assemble_tree([point, weight], joints, gravity=(0.0, 0.0, -9.81))
    q = jnp.array([1.0, 0.1, 0.0, 0.0]) / jnp.sqrt(1.01)
    qd = jnp.array([0.0, 0.0, 0.3, 0.0])
    mass, _ = eqx.filter_jit(lagrangian_terms)(tree.system.lagrangian, 0.0, q, qd, {})
    assert np.linalg.eigvalsh(mass).min() > 1e-3


class _Unlabelled(eqx.Module):
    """A hand-written loop joint without row names: two rows."""

    body: lb.PlanarBody

    def __call__(self, t, q, params):
        return self.body.position(q, params) - jnp.array([0.5, 0.0])


def test_hand_written_loop_joint_works_and_its_rows_need_names():
    bodies, joints = _chain_of("revolute", False, False)
    tree = lb.assemble_tree(bodies, (*joints, _Unlabelled(bodies[1])))
    assert tree.loop_joints == (2,) and len(tree.coordinates) == 2
    with pytest.raises(TypeError, match="joint 2 .*has no `labels`"):
        _ = tree.constraint_labels
