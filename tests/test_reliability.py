"""Bad input is named, bad states are caught, and a failure says which."""

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


def test_consistent_state_failure_gives_the_residual():
    # Fixing x at 2 l leaves no point of the circle: the residual is reported.
    with pytest.raises(ValueError, match=r"Reached max \|phi\| = [0-9.e+-]+"):
        lx.consistent_state(MODEL.system, jnp.array([2 * P["l"], 0.0]), QD0, P,
                            fixed_q=[0])  # fmt: skip
    with pytest.raises(Exception, match=r"did not converge.*Reached max \|phi\| ="):
        jax.jit(lambda q: lx.consistent_state(MODEL.system, q, QD0, P, fixed_q=[0]))(
            jnp.array([2 * P["l"], 0.0])
        )


@pytest.mark.slow
def test_soak_a_million_steps_with_projection():
    """benchmarks/soak.py: 10^6 fixed Dopri8 steps of the pendulum (about 15 s)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "soak.py"
    spec = importlib.util.spec_from_file_location("soak", path)
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)
    report = soak.soak(1_000_000)
    assert report["steps"] == 1_000_000
    assert report["max_phi"] < 1e-12 and report["max_phi_dot"] < 1e-12
    # Bounded: round-off level, and the second half no worse than the first
    # (a linear drift would double it).
    assert report["energy_error_second_half"] < 1e-11
    assert report["energy_error_second_half"] < 1.5 * max(
        report["energy_error_first_half"], 1e-13
    )
