"""Independent reference solutions, written without lagrax."""

import numpy as np
from scipy.integrate import solve_ivp


def solve_reference(rhs, y0, t_eval, rtol=1e-13, atol=1e-13):
    """Integrate a first-order ODE with scipy's DOP853 to near round-off."""
    sol = solve_ivp(
        rhs,
        (t_eval[0], t_eval[-1]),
        np.asarray(y0, dtype=float),
        method="DOP853",
        t_eval=t_eval,
        rtol=rtol,
        atol=atol,
    )
    assert sol.success, sol.message
    return sol.y.T


def mujoco_hard_loop_accelerations(mujoco, m, d):
    """The hard-constraint qacc of a MuJoCo model closed by one `equality
    connect`, from MuJoCo's own pieces at d.qpos, d.qvel: its mass matrix, bias
    and passive forces, the connect's rows of efc_J and their rate (mj_jacDot),
    solved as a KKT system by least squares (a planar loop's third row is
    redundant). MuJoCo's own equalities are soft; this is their hard limit."""
    mujoco.mj_forward(m, d)
    mass = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, mass)
    jac = d.efc_J.reshape(d.nefc, m.nv)[:3]
    b1, b2 = m.eq_obj1id[0], m.eq_obj2id[0]
    p1 = d.xpos[b1] + d.xmat[b1].reshape(3, 3) @ m.eq_data[0, :3]
    p2 = d.xpos[b2] + d.xmat[b2].reshape(3, 3) @ m.eq_data[0, 3:6]
    assert np.max(np.abs(p1 - p2)) < 1e-12  # the loop is closed
    rate1, rate2 = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    mujoco.mj_jacDot(m, d, rate1, None, p1, b1)
    mujoco.mj_jacDot(m, d, rate2, None, p2, b2)
    kkt = np.block([[mass, jac.T], [jac, np.zeros((3, 3))]])
    rhs = np.concatenate([d.qfrc_passive - d.qfrc_bias, -(rate1 - rate2) @ d.qvel])
    return np.linalg.lstsq(kkt, rhs, rcond=1e-12)[0][: m.nv]
