"""Property-based tests on random systems (hypothesis, bounded for CI).

Random systems of one fixed shape: n = 4 coordinates, a random SPD mass matrix,
a random potential (quadratic plus a cosine term), and m = 3 constraints, each
linear plus quadratic in q, of random rank: the first `rank` are random, the
rest random combinations of those (redundant). Everything random lives in
`params`, so each property compiles once and hypothesis only changes values.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lagrax as lx


N, M = 4, 3
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)
seeds = st.integers(0, 2**32 - 1)


def lagrangian(t, q, qd, p):
    potential = 0.5 * q @ p["K"] @ q + p["b"] @ q + p["c"] @ jnp.cos(q)
    return 0.5 * qd @ p["M"] @ qd - potential


def base_constraints(q, p):
    quadratic = jnp.einsum("i,kij,j->k", q, p["Q"], q)
    return p["C"] @ q + p["w"] * quadratic - p["r"]


def constraints(t, q, p):
    # Rows beyond the rank are combinations of the first ones (mixing matrix).
    return p["scale"] * (p["mix"] @ base_constraints(q, p))


SYSTEM = lx.System(lagrangian, constraints)


def random_system(seed, rank=M):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(N, N))
    q0 = rng.normal(size=N)
    p = {
        "M": a @ a.T + N * np.eye(N),
        "K": np.diag(rng.uniform(0.5, 2.0, N)),
        "b": rng.normal(size=N),
        "c": rng.uniform(0, 1, N),
        "C": rng.normal(size=(M, N)),
        "Q": 0.3 * rng.normal(size=(M, N, N)),
        "w": rng.uniform(-1, 1, M),
        "r": np.zeros(M),
        "scale": np.ones(M),
    }
    mix = np.eye(M)
    mix[rank:] = 0.0
    mix[rank:, :rank] = rng.normal(size=(M - rank, rank))
    p["mix"] = mix
    p = {k: jnp.asarray(v) for k, v in p.items()}
    p["r"] = base_constraints(jnp.asarray(q0), p)  # q0 is on the constraints
    # A velocity tangent to them: the projection of a random one.
    jac = jax.jacfwd(lambda q: base_constraints(q, p))(jnp.asarray(q0))
    v = rng.normal(size=N)
    qd0 = v - np.linalg.pinv(np.asarray(jac)) @ (np.asarray(jac) @ v)
    return p, jnp.asarray(q0), jnp.asarray(qd0)


@functools.partial(jax.jit, static_argnums=3)
def accelerations(p, q, qd, solver):
    qdd, lam = lx.accelerations(
        SYSTEM, 0.0, q, qd, p, saddle_solver=solver, throw=False
    )
    terms = lx.mechanics(SYSTEM, 0.0, q, qd, p)
    return qdd, lam, terms


def final_state_of(system):
    """A jitted (params, q0, qd0) -> (q, multipliers, energy, result) at 6 times."""

    @jax.jit
    def final_state(p, q0, qd0):
        sol = lx.simulate(
            system, q0, qd0, p, t1=1.0, ts=jnp.linspace(0.0, 1.0, 6), rtol=1e-11,
            atol=1e-11, saddle_solver=lx.LeastSquares(),
        )  # fmt: skip
        return sol.q, sol.multipliers, sol.energy, sol.result

    return final_state


final_state = final_state_of(SYSTEM)


@SETTINGS
@given(seed=seeds, rank=st.integers(1, M))
def test_constraint_accelerations_hold_to_round_off(seed, rank):
    p, q, qd = random_system(seed, rank)
    qdd, _, terms = accelerations(p, q, qd, lx.LeastSquares())
    scale = (
        1
        + jnp.max(jnp.abs(terms.jac)) * jnp.max(jnp.abs(qdd))
        + jnp.max(jnp.abs(terms.gamma))
    )
    np.testing.assert_allclose(terms.jac @ qdd + terms.gamma, 0.0, atol=1e-10 * scale)


@SETTINGS
@given(seed=seeds)
def test_saddle_solvers_agree(seed):
    p, q, qd = random_system(seed)
    results = [
        accelerations(p, q, qd, s)[:2]
        for s in (lx.SchurCholesky(), lx.DenseLU(), lx.LeastSquares())
    ]
    for qdd, lam in results[1:]:
        np.testing.assert_allclose(qdd, results[0][0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(lam, results[0][1], rtol=1e-7, atol=1e-9)


@SETTINGS
@given(seed=seeds, rank=st.integers(1, M - 1))
def test_redundant_rows_change_nothing_but_the_multipliers(seed, rank):
    p, q, qd = random_system(seed, rank)
    qdd, lam, _ = accelerations(p, q, qd, lx.LeastSquares())
    # The same system with the redundant rows replaced by 0 = 0 rows.
    p0 = dict(p, mix=p["mix"].at[rank:].set(0.0))
    qdd0, lam0, _ = accelerations(p0, q, qd, lx.LeastSquares())
    np.testing.assert_allclose(qdd, qdd0, rtol=1e-7, atol=1e-9)
    # Equal generalized constraint forces J^T lam.
    jac = jax.jacfwd(lambda x: constraints(0.0, x, p))(q)
    jac0 = jax.jacfwd(lambda x: constraints(0.0, x, p0))(q)
    np.testing.assert_allclose(jac.T @ lam, jac0.T @ lam0, rtol=1e-6, atol=1e-8)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=seeds)
def test_energy_is_conserved(seed):
    p, q0, qd0 = random_system(seed)
    _, _, energy, result = final_state(p, q0, qd0)
    assert result == lx.RESULTS.successful
    np.testing.assert_allclose(energy, energy[0], rtol=1e-8, atol=1e-8)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=seeds, factor=st.floats(-10.0, 10.0).filter(lambda c: abs(c) > 0.1))
def test_scaling_a_constraint_scales_its_multiplier(seed, factor):
    p, q0, qd0 = random_system(seed)
    q, lam, _, _ = final_state(p, q0, qd0)
    scaled = dict(p, scale=p["scale"].at[1].set(factor))
    q_c, lam_c, _, result = final_state(scaled, q0, qd0)
    assert result == lx.RESULTS.successful
    np.testing.assert_allclose(q_c, q, atol=1e-8)
    expected = lam.at[:, 1].divide(factor)
    np.testing.assert_allclose(lam_c, expected, rtol=1e-6, atol=1e-7)


def rotated(system):
    """The system in coordinates q' with q = R q' (R orthogonal, in params)."""

    def lagrangian_r(t, q, qd, p):
        return system.lagrangian(t, p["R"] @ q, p["R"] @ qd, p)

    def constraints_r(t, q, p):
        return system.constraints(t, p["R"] @ q, p)

    return lx.System(lagrangian_r, constraints_r)


ROTATED = rotated(SYSTEM)


final_rotated = final_state_of(ROTATED)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=seeds)
def test_a_rigid_rotation_of_the_coordinates_changes_nothing(seed):
    p, q0, qd0 = random_system(seed)
    rng = np.random.default_rng(seed + 1)
    rotation, _ = np.linalg.qr(rng.normal(size=(N, N)))
    rotation = jnp.asarray(rotation)
    q, lam, _, _ = final_state(p, q0, qd0)
    q_r, lam_r, _, _ = final_rotated(
        dict(p, R=rotation), rotation.T @ q0, rotation.T @ qd0
    )
    np.testing.assert_allclose(q_r @ rotation.T, q, atol=1e-8)
    np.testing.assert_allclose(lam_r, lam, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("rank", [1, 2])
def test_redundant_rows_are_flagged_by_schur(rank):
    p, q, qd = random_system(7, rank)
    with pytest.raises(Exception, match="redundant"):
        lx.accelerations(SYSTEM, 0.0, q, qd, p)
