"""Every built-in model is complete: consistent start, names, drawing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagrax as lx


@pytest.mark.parametrize("name", sorted(lx.systems.BUILTIN))
def test_builtin_model_is_complete(name):
    model = lx.systems.get(name)
    assert model.name == name and model.description
    q0, qd0 = model.initial_state()
    n = q0.shape[0]
    assert len(model.coordinates) == len(model.units) == n
    # Under jit: one program, rather than every autodiff operation compiled alone.
    terms = jax.jit(lambda q, qd: lx.mechanics(model.system, 0.0, q, qd, model.params))(
        q0, qd0
    )
    assert len(model.constraint_names) == terms.phi.shape[0]
    # Consistent: on the manifold to round-off, positions and velocities.
    scale = 1 + float(jnp.abs(q0).max())
    assert float(jnp.abs(terms.phi).max()) < 1e-13 * scale**2
    assert float(jnp.abs(terms.phi_dot).max()) < 1e-13 * scale**2
    np.testing.assert_array_equal(
        np.asarray(q0)[list(model.fixed_q)],
        np.asarray(model.q_guess)[list(model.fixed_q)],
    )
    points = model.points(0.0, q0, model.params)
    assert points.ndim == 2 and points.shape[1] == 2
    assert all(0 <= i < points.shape[0] for seg in model.segments for i in seg)


def test_unknown_system_lists_the_names():
    with pytest.raises(ValueError, match="unknown system 'pendulum2'.*double_pendulum"):
        lx.systems.get("pendulum2")
