"""The interior-point NLP solver under optimize_controls, on problems with
published or closed-form solutions (Hock & Schittkowski 1981)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagrax.optimize._interior_point import interior_point


def _hs071_objective(v, args):
    x = v[:4]
    return x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2]


def _hs071_constraints(v, radius2):
    # x1 x2 x3 x4 >= 25 as x1 x2 x3 x4 - s = 0 with the slack s >= 25.
    x = v[:4]
    return jnp.stack([x[0] * x[1] * x[2] * x[3] - v[4], x @ x - radius2])


_HS071_BOUNDS = (jnp.array([1.0, 1, 1, 1, 25]), jnp.array([5.0, 5, 5, 5, jnp.inf]))
_HS071_START = jnp.array([1.0, 5, 5, 1, 25])


def _problems():
    """(objective, constraints, x0, lower, upper, args, eliminate), fresh
    functions on every call so that each solve traces anew."""

    def hs071(v, args):
        return _hs071_objective(v, args)

    def hs071_c(v, radius2):
        return _hs071_constraints(v, radius2)

    def rolled(v, args):
        return _hs071_objective(jnp.roll(v, -1), args)

    def rolled_c(v, radius2):
        # s - x1 x2 x3 x4 = 0: unit diagonal in the eliminated unknown.
        return -_hs071_constraints(jnp.roll(v, -1), radius2)

    def quartic(x, args):
        d = x[0] - x[1]
        return d**4 - d**2

    def twice(x, args):
        return jnp.stack([x[0] + x[1] - 1, 2 * x[0] + 2 * x[1] - 2])

    def rosenbrock(x, args):
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2

    def none(x, args):
        return jnp.zeros(0)

    free = (jnp.full(2, -jnp.inf), jnp.full(2, jnp.inf))
    rolled_bounds = tuple(jnp.roll(b, 1) for b in _HS071_BOUNDS)
    return {
        "hs071": (hs071, hs071_c, _HS071_START, *_HS071_BOUNDS, 40.0, 0),
        "hs071 condensed": (
            rolled, rolled_c, jnp.roll(_HS071_START, 1), *rolled_bounds, 40.0, 1,
        ),
        "dependent rows": (quartic, twice, jnp.array([0.6, 0.4]), *free, None, 0),
        "no constraints": (
            rosenbrock, none, jnp.array([-1.2, 1.0]), free[0],
            jnp.array([0.5, jnp.inf]), None, 0,
        ),
    }  # fmt: skip


def test_hs071_reaches_the_published_optimum():
    """Hock-Schittkowski problem 71 (the IPOPT tutorial problem): f* =
    17.0140173 at x* = (1, 4.7429994, 3.8211503, 1.3794082); IPOPT takes 8
    iterations."""
    sol = interior_point(
        _hs071_objective, _hs071_constraints, _HS071_START, *_HS071_BOUNDS, 40.0
    )
    assert bool(sol.converged) and not bool(sol.failed)
    assert float(sol.objective) == pytest.approx(17.0140173, abs=1e-7)
    np.testing.assert_allclose(
        sol.x[:4], [1.0, 4.7429994, 3.8211503, 1.3794082], atol=1e-6
    )
    assert float(sol.max_violation) < 1e-8
    assert int(sol.iterations) <= 12


def test_hs035_convex_qp_with_an_inequality():
    """HS 35: f* = 1/9 at x* = (4/3, 7/9, 4/9), the inequality active."""

    def objective(v, args):
        x1, x2, x3 = v[0], v[1], v[2]
        return (
            9 - 8 * x1 - 6 * x2 - 4 * x3 + 2 * x1**2 + 2 * x2**2 + x3**2
            + 2 * x1 * x2 + 2 * x1 * x3
        )  # fmt: skip

    def constraints(v, args):  # x1 + x2 + 2 x3 + s = 3, s >= 0
        return jnp.stack([v[0] + v[1] + 2 * v[2] + v[3] - 3])

    sol = interior_point(
        objective, constraints, jnp.full(4, 0.5), jnp.zeros(4), jnp.full(4, jnp.inf)
    )
    assert bool(sol.converged)
    assert float(sol.objective) == pytest.approx(1 / 9, abs=1e-8)
    np.testing.assert_allclose(sol.x[:3], [4 / 3, 7 / 9, 4 / 9], atol=1e-6)


def test_nonconvex_objective_with_an_active_bound_and_no_constraints():
    """Rosenbrock with x <= 0.5: the minimum is on the bound, at (0.5, 0.25),
    f = 0.25. Its Hessian is indefinite on the way (the inertia correction)."""
    objective, constraints, x0, lower, upper, args, _ = _problems()["no constraints"]
    sol = interior_point(objective, constraints, x0, lower, upper, args)
    assert bool(sol.converged)
    np.testing.assert_allclose(sol.x, [0.5, 0.25], atol=1e-7)
    assert float(sol.z_upper[0]) > 0  # the bound holds it


def test_vmap_over_problems_matches_one_at_a_time():
    radii = jnp.array([38.0, 40.0, 42.0])

    def solve(radius2):
        return interior_point(
            _hs071_objective, _hs071_constraints, _HS071_START, *_HS071_BOUNDS,
            radius2,
        )  # fmt: skip

    batch = jax.vmap(solve)(radii)
    assert bool(jnp.all(batch.converged))
    for i, radius2 in enumerate(radii):
        one = solve(radius2)
        np.testing.assert_allclose(batch.x[i], one.x, atol=1e-9)
        assert int(batch.iterations[i]) == int(one.iterations)


def test_max_steps_is_not_convergence():
    sol = interior_point(
        _hs071_objective, _hs071_constraints, _HS071_START, *_HS071_BOUNDS, 40.0,
        max_steps=3,
    )  # fmt: skip
    assert int(sol.iterations) == 3
    assert not bool(sol.converged) and not bool(sol.failed)
    assert float(sol.kkt_error) > 1e-8  # of the point returned


def test_dependent_equality_constraints_with_negative_curvature():
    """The same constraint twice (a rank-deficient Jacobian, as terminal
    conditions redundant with a constraint manifold give) and an objective with
    negative curvature along it at the start: the inertia correction must raise
    delta_w while IPOPT's delta_c keeps the dependent rows' eigenvalues negative.
    f = d^4 - d^2 with d = x - y on x + y = 1: from d = 0.2 the minimum at
    d = 1 / sqrt(2)."""
    objective, constraints, x0, lower, upper, args, _ = _problems()["dependent rows"]
    sol = interior_point(objective, constraints, x0, lower, upper, args)
    assert bool(sol.converged) and not bool(sol.failed)
    d = 2**-0.5
    np.testing.assert_allclose(sol.x, [(1 + d) / 2, (1 - d) / 2], atol=1e-7)


def test_eliminating_constraints_takes_the_same_steps():
    """HS 71 with the slack s first: its defining constraint s - x1 x2 x3 x4 = 0
    determines it, so it can be eliminated (condensing). The steps are the same
    as on the full KKT system: same iterations, same optimum."""
    objective, constraints, x0, lower, upper, args, e = _problems()["hs071 condensed"]
    full = interior_point(objective, constraints, x0, lower, upper, args)
    condensed = interior_point(
        objective, constraints, x0, lower, upper, args, eliminate=e
    )
    assert bool(condensed.converged)
    assert int(condensed.iterations) == int(full.iterations)
    np.testing.assert_allclose(condensed.x, full.x, atol=1e-9)
    np.testing.assert_allclose(condensed.multipliers, full.multipliers, atol=1e-7)
    np.testing.assert_allclose(full.x[1:], [1.0, 4.7429994, 3.8211503, 1.3794082],
                               atol=1e-6)  # fmt: skip
    assert float(condensed.objective) == pytest.approx(17.0140173, abs=1e-7)


def test_infeasible_linearization_is_reported_not_claimed():
    """Wachter and Biegler's example (Math. Program. 88, 2000, "Failure of global
    convergence for a class of interior point methods"): min x1 s.t.
    x1^2 - x2 - 1 = 0, x1 - x3 - 1/2 = 0, x2, x3 >= 0 from (-2, 1, 1). Methods
    whose steps satisfy the linearized constraints stall at an infeasible point
    against the bounds; without IPOPT's full restoration phase the solver must
    say so (failed, not converged), with its iterate still inside the bounds."""

    def objective(x, args):
        return x[0]

    def constraints(x, args):
        return jnp.stack([x[0] ** 2 - x[1] - 1, x[0] - x[2] - 0.5])

    lower = jnp.array([-jnp.inf, 0.0, 0.0])
    sol = interior_point(
        objective, constraints, jnp.array([-2.0, 1.0, 1.0]), lower, jnp.full(3, jnp.inf)
    )
    assert bool(sol.failed) and not bool(sol.converged)
    assert np.all(np.isfinite(sol.x)) and np.all(sol.x[1:] > 0)
    assert float(sol.max_violation) > 1e-3


@pytest.mark.parametrize(
    "name", ["hs071", "hs071 condensed", "dependent rows", "no constraints"]
)
def test_the_reduced_hessian_inertia_test_agrees_with_the_eigenvalues(
    name, monkeypatch
):
    """Large KKT matrices read their inertia from the reduced Hessian
    Z^T (W + delta_w M) Z (a pivoted QR of J^T, one eigendecomposition per
    iteration) instead of the eigenvalues of the whole matrix. On these small
    problems, forced down that path, it must pick the same delta_w: same
    iterations, same optimum; with dependent rows (Z from the rank of J), an
    eliminated constraint (M not the identity) and no constraints at all."""
    import lagrax.optimize._interior_point as ip

    f, c, x0, lo, hi, args, e = _problems()[name]
    by_eigenvalues = interior_point(f, c, x0, lo, hi, args, eliminate=e)
    monkeypatch.setattr(ip, "_EIGEN_UP_TO", 0)
    f, c, x0, lo, hi, args, e = _problems()[name]  # new functions: a new trace
    reduced = interior_point(f, c, x0, lo, hi, args, eliminate=e)
    assert bool(by_eigenvalues.converged) and bool(reduced.converged)
    assert int(reduced.iterations) == int(by_eigenvalues.iterations)
    np.testing.assert_allclose(reduced.x, by_eigenvalues.x, atol=1e-9)
