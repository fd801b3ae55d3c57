"""Bad input is named, bad states are caught, and a failure says which."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


MODEL = lx.systems.pendulum()
P = MODEL.params
Q0, QD0 = MODEL.initial_state()
# Typed in by hand to four digits: off the circle by 1e-5 of its radius.
ROUGH = jnp.array([0.7071, -0.7071]) * P["l"]


ZERO = jnp.zeros(2)


def run(q0, qd0=ZERO, params=P, system=MODEL.system, **kw):
    return lx.simulate(system, q0, qd0, params, t1=0.5, **kw)


def test_forces_of_the_wrong_length_are_named():
    def three_forces(t, q, qd, p):
        return jnp.zeros(3)

    system = lx.System(MODEL.system.lagrangian, MODEL.system.constraints, three_forces)
    with pytest.raises(ValueError, match="three_forces.*shape of q"):
        run(Q0, QD0, system=system)


def test_non_numeric_params_are_named():
    with pytest.raises(TypeError, match=r"params\['mode'\] is a str"):
        run(Q0, QD0, params={**P, "mode": "fast"})
    with pytest.raises(TypeError, match=r"params\['g'\]\[1\] is a builtin"):
        lx.accelerations(MODEL.system, 0.0, Q0, QD0, {**P, "g": [9.81, print]})


def test_inconsistent_start_is_refused_with_the_fix():
    with pytest.raises(Exception, match="not consistent.*project_initial=True"):
        run(ROUGH)
    sol = run(ROUGH, throw=False)
    assert sol.result == lx.RESULTS.inconsistent_initial_state
    # An inconsistent velocity counts too.
    sol = run(Q0, jnp.array([1.0, 1.0]), throw=False)
    assert sol.result == lx.RESULTS.inconsistent_initial_state


def test_project_initial_starts_on_the_constraints():
    sol = run(ROUGH, jnp.array([0.3, 0.1]), project_initial=True, rtol=1e-10,
              atol=1e-10)  # fmt: skip
    assert sol.result == lx.RESULTS.successful
    np.testing.assert_allclose(sol.phi[0], 0.0, atol=1e-13)
    np.testing.assert_allclose(sol.phi_dot[0], 0.0, atol=1e-13)
    # The nearest point of the circle, as consistent_state finds it.
    q, _ = lx.consistent_state(MODEL.system, ROUGH, jnp.array([0.3, 0.1]), P)
    np.testing.assert_allclose(sol.q[0], q, atol=1e-12)
    np.testing.assert_allclose(sol.q[0], ROUGH * P["l"] / jnp.linalg.norm(ROUGH))


def test_project_initial_reports_an_impossible_start():
    def unreachable(t, q, p):  # no real point satisfies it
        return jnp.stack([q @ q + 1.0])

    system = lx.System(MODEL.system.lagrangian, unreachable)
    sol = run(Q0, QD0, system=system, project_initial=True, throw=False)
    assert sol.result == lx.RESULTS.initial_projection_failed
    with pytest.raises(Exception, match="project_initial: no state"):
        run(Q0, QD0, system=system, project_initial=True)


@pytest.mark.parametrize("where", ["params", "q0", "qd0"])
def test_nonfinite_inputs_are_named(where):
    q0, qd0, params = Q0, QD0, dict(P)
    if where == "params":
        params["g"] = float("nan")
    elif where == "q0":
        q0 = q0.at[0].set(jnp.inf)
    else:
        qd0 = qd0.at[1].set(jnp.nan)
    sol = run(q0, qd0, params=params, throw=False)
    assert sol.result == lx.RESULTS.nonfinite_inputs
    with pytest.raises(Exception, match="NaN or inf in q0, qd0 or params"):
        run(q0, qd0, params=params)


def test_nonfinite_terms_are_named():
    def sqrt_potential(t, q, qd, p):  # sqrt of a negative height: NaN forces
        return 0.5 * qd @ qd - jnp.sqrt(q[1])

    system = lx.System(sqrt_potential, MODEL.system.constraints)
    below = ROUGH * P["l"] / jnp.linalg.norm(ROUGH)  # y < 0: sqrt(y) is NaN
    with pytest.raises(Exception, match="evaluated to NaN or inf"):
        run(below, system=system)
    sol = run(below, system=system, throw=False)
    assert sol.result == lx.RESULTS.nonfinite_terms
    with pytest.raises(Exception, match="evaluated to NaN or inf"):
        lx.accelerations(system, 0.0, below, QD0, P)


def test_indefinite_mass_matrix_is_named():
    def negative_mass(t, q, qd, p):
        return -0.5 * qd @ qd - 9.81 * q[1]

    system = lx.System(negative_mass, MODEL.system.constraints)
    with pytest.raises(Exception, match="not positive definite"):
        run(Q0, QD0, system=system)
    assert run(Q0, QD0, system=system, throw=False).result == (
        lx.RESULTS.mass_matrix_not_positive_definite
    )


def test_max_steps_says_what_to_do():
    with pytest.raises(Exception, match="raise max_steps, or loosen rtol"):
        run(Q0, QD0, max_steps=3)
    assert run(Q0, QD0, max_steps=3, throw=False).result == lx.RESULTS.max_steps


def test_raising_programs_are_kept_by_the_persistent_cache(tmp_path):
    """With throw=True (the default) the result is checked on the host, after the
    compiled program, which then holds no host callback: XLA's persistent
    compilation cache refuses programs with one, and keeps these, so that a
    re-run script loads them instead of compiling them again. The check still
    raises, by name."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    def lagrangian(t, q, qd, p):  # a system, hence programs, of this test only
        return MODEL.system.lagrangian(t, q, qd, p)

    system = lx.System(lagrangian, MODEL.system.constraints)
    options = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
    )
    before = [getattr(jax.config, name) for name in options]
    jax.config.update(options[0], str(tmp_path))
    jax.config.update(options[1], 0)
    cc.reset_cache()
    try:
        # Saved times and a fixed step: diffrax checks both (here as NaN).
        ts = jnp.linspace(0.0, 0.5, 7)
        lx.simulate(system, ROUGH, ZERO, P, t1=0.5, ts=ts, project_initial=True)
        lx.simulate(system, Q0, QD0, P, t1=0.5, solver=lx.RK4(), dt0=0.05)
        lx.accelerations(system, 0.0, Q0, QD0, P)
        lx.consistent_state(system, ROUGH, ZERO, P)
        with pytest.raises(eqx.EquinoxRuntimeError, match="raise max_steps"):
            lx.simulate(system, Q0, QD0, P, t1=0.5, max_steps=3)
    finally:
        for name, value in zip(options, before, strict=True):
            jax.config.update(name, value)
        cc.reset_cache()
    kept = [path.name.split("-")[0] for path in tmp_path.iterdir()]
    assert kept.count("jit__simulate") == 3, kept
    assert "jit__accelerations" in kept, kept
    assert "jit__consistent_state" in kept, kept


def test_a_failure_raises_under_jit_and_vmap_too():
    """Under the caller's own trace the check is compiled in: it raises with the
    message, and under vmap names the failed members."""
    with pytest.raises(Exception, match="raise max_steps"):
        jax.jit(lambda q: run(q, QD0, max_steps=3).q)(Q0)
    g = jnp.array([P["g"], jnp.nan])
    with pytest.raises(Exception, match=r"(?s)1 of 2 members.*nonfinite_inputs at "
                       r"members \[1\]"):  # fmt: skip
        jax.vmap(lambda g_: run(Q0, QD0, params={**P, "g": g_}).q)(g)


def test_checks_traced_outside_simulate_still_raise():
    """simulate traces equinox's checks as NaN in a compiled function of its
    own: diffrax's check of dt0, traced by the user's own solve after simulate
    traced it, still raises."""
    lx.simulate(MODEL.system, Q0, QD0, P, t1=0.5, solver=lx.RK4(), dt0=0.05)

    @jax.jit
    def solve(t0, t1, dt0):  # traced as simulate traces them: the same message
        term = dfx.ODETerm(lambda t, y, args: -y)
        return dfx.diffeqsolve(term, dfx.Euler(), t0, t1, dt0, jnp.ones(2)).ys

    with pytest.raises(Exception, match=r"dt0 >= 0"):
        solve(*jnp.array([0.0, 0.5, -0.05]))
    with pytest.raises(Exception, match="negative"):
        jax.jit(lambda x: eqx.error_if(x, x < 0, "negative"))(jnp.asarray(-1.0))


def test_consistent_state_failure_gives_the_residual():
    # Fixing x at 2 l leaves no point of the circle: the residual is reported.
    with pytest.raises(ValueError, match=r"Reached max \|phi\| = [0-9.e+-]+"):
        lx.consistent_state(MODEL.system, jnp.array([2 * P["l"], 0.0]), QD0, P,
                            fixed_q=[0])  # fmt: skip
    with pytest.raises(Exception, match=r"did not converge.*Reached max \|phi\| ="):
        jax.jit(lambda q: lx.consistent_state(MODEL.system, q, QD0, P, fixed_q=[0]))(
            jnp.array([2 * P["l"], 0.0])
        )


@pytest.mark.parametrize(
    "steps", [200_000, pytest.param(1_000_000, marks=pytest.mark.slow)]
)
def test_soak_with_projection(steps):
    """benchmarks/soak.py: fixed Dopri8 steps of the pendulum, projected after each
    (10^6 steps, about 15 s of running, with `-m slow`)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "soak.py"
    spec = importlib.util.spec_from_file_location("soak", path)
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)
    report = soak.soak(steps)
    assert report["steps"] == steps
    assert report["max_phi"] < 1e-12 and report["max_phi_dot"] < 1e-12
    # Bounded: round-off level, and the second half no worse than the first
    # (a linear drift would double it).
    assert report["energy_error_second_half"] < 1e-11
    assert report["energy_error_second_half"] < 1.5 * max(
        report["energy_error_first_half"], 1e-13
    )


# ---------------------------------------------------------------------------
# A failure ends the solve at once, with its own cause.


def _sqrt_system():
    """V = -g sqrt(y): NaN forces once the bob goes below y = 0."""

    def sqrt_potential(t, q, qd, p):
        return 0.5 * qd @ qd - p["g"] * jnp.sqrt(q[1])

    return lx.System(sqrt_potential, MODEL.system.constraints)


SQRT = _sqrt_system()
ABOVE = P["l"] * jnp.array([np.sin(1.0), np.cos(1.0)])  # y > 0, falls through y = 0


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(ts=jnp.linspace(0.0, 3.0, 31)),
        dict(stabilization=lx.Baumgarte(5.0, 5.0)),
        dict(stepsize_controller=dfx.ConstantStepSize(), dt0=0.01),
    ],
    ids=["adaptive", "ts", "baumgarte", "fixed"],
)
def test_nan_reached_mid_run_is_named_at_once(kw):
    """The bob crosses y = 0 at t = 0.83 s (for the pendulum of length 2.5 from
    1 rad off the top): the solve stops there, named as NaN terms, after a few
    dozen steps, not after max_steps (4096) reported as max_steps."""
    sol = lx.simulate(SQRT, ABOVE, ZERO, P, t1=3.0, throw=False, **kw)
    assert sol.status == "nonfinite_terms"
    assert int(sol.stats["num_steps"]) < 300
    reached = np.asarray(sol.q[:, 1])[np.isfinite(np.asarray(sol.q[:, 1]))]
    assert reached.min() >= 0.0  # every reported state is where the model is defined
    with pytest.raises(Exception, match="evaluated to NaN or inf"):
        lx.simulate(SQRT, ABOVE, ZERO, P, t1=3.0, **kw)


def test_throw_false_never_raises_with_least_squares():
    """lineax inside LeastSquares is called with throw=False: NaN parameters give
    a result code, not lineax's error."""
    bad = {**P, "g": float("nan")}
    sol = run(Q0, QD0, params=bad, throw=False, saddle_solver=lx.LeastSquares())
    assert sol.status == "nonfinite_inputs"
    sol = lx.simulate(SQRT, ABOVE, ZERO, P, t1=3.0, throw=False,
                      saddle_solver=lx.LeastSquares())  # fmt: skip
    assert sol.status == "nonfinite_terms"


def test_singular_configuration_reached_mid_run_is_named():
    """x = t and x + (t - 2) y = 0: the two constraint rows (1, 0) and (1, t - 2)
    become dependent at t = 2, where y = -t / (t - 2) blows up. The run stops
    before t = 2 and says it met a singular configuration, for every saddle
    solver; with the exact y(t) until then."""

    def free(t, q, qd, p):
        return 0.5 * qd @ qd

    def rows(t, q, p):
        return jnp.stack([q[0] - t, q[0] + (t - 2.0) * q[1]])

    system = lx.System(free, rows)
    q0, qd0 = jnp.zeros(2), jnp.array([1.0, 0.5])
    ts = jnp.linspace(0.0, 3.0, 31)
    for solver in (lx.SchurCholesky(), lx.LeastSquares()):
        sol = lx.simulate(system, q0, qd0, {}, t1=3.0, ts=ts, throw=False,
                          saddle_solver=solver)  # fmt: skip
        assert sol.status == "singular_configuration", type(solver)
        t = np.asarray(sol.ts)
        ok = np.isfinite(t)
        assert t[ok].max() < 2.0 and not ok[t.size - 10 :].any()
        np.testing.assert_allclose(sol.q[ok, 1], -t[ok] / (t[ok] - 2.0), rtol=1e-6)


def test_redundant_at_the_start_is_not_a_singular_configuration():
    def twice(t, q, p):
        return jnp.stack([q @ q - p["l"] ** 2, 2 * (q @ q - p["l"] ** 2)])

    system = lx.System(MODEL.system.lagrangian, twice)
    sol = run(Q0, QD0, system=system, throw=False, ts=jnp.linspace(0.0, 0.5, 5))
    assert sol.status == "redundant_constraints"
    assert int(sol.stats["num_steps"]) < 100


# ---------------------------------------------------------------------------
# Batches: a bad member costs nothing, and is named.


def _batch(g):
    params = {k: jnp.full(g.shape, v) for k, v in P.items()} | {"g": g}
    return params


def test_one_bad_member_costs_the_batch_nothing():
    clean = jnp.full(6, P["g"])
    bad = clean.at[2].set(jnp.nan).at[4].set(jnp.inf)
    q0s, qd0s = jnp.tile(Q0, (6, 1)), jnp.tile(QD0, (6, 1))
    kw = dict(t1=5.0, max_steps=512, throw=False, params_batched=True)
    sols = lx.simulate_batch(MODEL.system, q0s, qd0s, _batch(bad), **kw)
    reference = lx.simulate_batch(MODEL.system, q0s, qd0s, _batch(clean), **kw)
    steps = np.asarray(sols.stats["num_steps"])
    assert steps[2] == steps[4] == 1  # ended at once
    # The lockstep loop runs as long as its longest member: as long as clean.
    assert steps.max() == np.asarray(reference.stats["num_steps"]).max()
    assert list(np.flatnonzero(sols.failed)) == [2, 4]
    assert list(sols.status) == ["successful"] * 2 + ["nonfinite_inputs"] + [
        "successful", "nonfinite_inputs", "successful"]  # fmt: skip
    member = sols[3]
    assert isinstance(member, lx.Trajectory) and member.q.shape == reference.q.shape[1:]
    np.testing.assert_array_equal(member.q, reference.q[3])
    assert lx.RESULTS[sols[2].result].startswith("NaN or inf in q0, qd0 or params")
    with pytest.raises(TypeError, match="members of a batch"):
        member[0]
    with pytest.raises(Exception, match=r"(?s)2 of 6 members.*nonfinite_inputs at "
                       r"members \[2, 4\]"):  # fmt: skip
        lx.simulate_batch(MODEL.system, q0s, qd0s, _batch(bad), t1=5.0,
                          params_batched=True)  # fmt: skip


def test_success_prints_as_a_word():
    sol = run(Q0, QD0, throw=False)
    assert sol.status == "successful" and not sol.failed
    assert "successful" in repr(sol.result) and lx.RESULTS[sol.result] == "successful"


# ---------------------------------------------------------------------------
# Bad arguments are refused up front, named.


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(t1=float("nan")), "t1"),
        (dict(t0=float("inf")), "t0"),
        (dict(dt0=float("nan")), "dt0"),
        (dict(dt0=-0.1), "dt0"),
        (dict(rtol=0.0), "rtol"),
        (dict(atol=-1e-8), "atol"),
        (dict(rtol=float("nan")), "rtol"),
        (dict(max_steps=0), "max_steps"),
        (dict(max_steps=None), "max_steps"),
        (dict(ts=jnp.array([0.0, 0.4, 0.2])), "ts"),
        (dict(ts=jnp.array([0.0, 0.7])), "ts"),
        (dict(ts=jnp.array([0.0, jnp.nan])), "ts"),
    ],
)
def test_bad_arguments_are_refused_by_name(kw, name):
    kw = {"t1": 0.5, **kw}
    with pytest.raises(ValueError, match=rf"simulate: {name} "):
        lx.simulate(MODEL.system, Q0, QD0, P, throw=False, **kw)
    with pytest.raises(ValueError, match=rf"simulate_batch: {name} "):
        lx.simulate_batch(MODEL.system, Q0[None], QD0[None], P, throw=False, **kw)


def test_traced_bad_arguments_are_reported():
    """Under jit the values are not known up front: the result says so, and
    nothing raises with throw=False."""

    @jax.jit
    def status(t1):
        return lx.simulate(MODEL.system, Q0, QD0, P, t1=t1, throw=False).result

    assert status(0.5) == lx.RESULTS.successful
    assert status(jnp.nan) == lx.RESULTS.invalid_arguments


def test_gradient_of_a_run_that_ends_near_where_the_model_fails():
    """The diagnosis probes beyond the final state, where the model may be NaN;
    they must not leak into the gradient of a successful run. Stopping at t1 =
    0.8 s, just before the bob reaches y = 0 (t = 0.83 s): the derivative of the
    final height with respect to g against central differences."""

    def height(g):
        sol = lx.simulate(SQRT, ABOVE, ZERO, {**P, "g": g}, t1=0.8, rtol=1e-10,
                          atol=1e-10)  # fmt: skip
        return sol.q[-1, 1]

    grad = jax.grad(height)(9.81)
    h = 1e-4
    fd = (height(9.81 + h) - height(9.81 - h)) / (2 * h)
    assert np.isfinite(grad) and abs(grad) > 1e-3
    np.testing.assert_allclose(grad, fd, rtol=1e-5)
