"""Bricard's overconstrained 6R linkage: five slender bars and the ground in a
closed loop of six hinges, one degree of freedom, one redundant constraint.

The loop follows six edges of a unit cube, (0, 0, 0) -> (1, 0, 0) -> (1, 1, 0) ->
(1, 1, 1) -> (0, 1, 1) -> (0, 0, 1) -> back, the last edge being the ground. Each
hinge axis is perpendicular to the two bars it joins (their cross product), so
neighbouring axes are orthogonal: Bricard's orthogonal linkage. Counting rows,
5 bodies x 7 coordinates = 35 against 6 hinges x 5 + 5 unit quaternions = 35:
Gruebler's count says it cannot move, yet it moves with one degree of freedom,
because one of the 35 rows depends on the others all along the motion. The bars
are slender (no inertia about their own axis), so the mass matrix is singular,
positive definite only where the hinges allow motion. Both call for
`saddle_solver=lx.AugmentedLagrangian()`.

Reference: R. Bricard, "Memoire sur la theorie de l'octaedre articule", J. Math.
Pures Appl. 3 (1897) 113-148; the IFToMM multibody benchmark library's Bricard
mechanism (problem A04) is of this kind.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .. import bodies as lb
from .._model import Model
from ._drawing import cabinet


CORNERS = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 1], [0, 0, 1]],
                   dtype=float)  # fmt: skip


NAMES = ("x", "y", "z", "e0_", "e1_", "e2_", "e3_")


def _floats(vector) -> tuple[float, ...]:
    # Python floats: static in the System's pytree, so a joint's fixed
    # directions are worked out once when it is traced, not in the program.
    return tuple(float(x) for x in vector)


def _frame(direction) -> np.ndarray:
    """A rotation taking the body x axis to `direction` (a unit cube edge)."""
    x = np.asarray(direction, dtype=float)
    helper = np.eye(3)[np.argmin(np.abs(x))]
    y = np.cross(helper, x)
    y /= np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def _quaternion(matrix) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix, largest-component branch."""
    m = matrix
    trace = np.trace(m)
    if trace > 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        return np.array(
            [
                w,
                (m[2, 1] - m[1, 2]) / (4 * w),
                (m[0, 2] - m[2, 0]) / (4 * w),
                (m[1, 0] - m[0, 1]) / (4 * w),
            ]
        )
    i = int(np.argmax(np.diagonal(m)))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
    e = np.zeros(4)
    e[0] = (m[k, j] - m[j, k]) / s
    e[1 + i] = s / 4
    e[1 + j] = (m[j, i] + m[i, j]) / s
    e[1 + k] = (m[k, i] + m[i, k]) / s
    return e  # fmt: skip


def bricard() -> Model:
    """Five uniform slender bars (m = 1 kg, L = 1 m, inertia m L^2 / 12 across,
    none along), gravity g along -y, moving from the cube-edge configuration with
    a speed of about 1 m/s at the bars' ends (the motion's own direction: the
    null space of the constraint Jacobian there)."""
    frames = [_frame(CORNERS[i + 1] - CORNERS[i]) for i in range(5)]
    bars = tuple(
        lb.SpatialBody(7 * i, "m", lambda p: jnp.stack(
            [0.0 * p["m"], p["m"] * p["L"] ** 2 / 12, p["m"] * p["L"] ** 2 / 12]))
        for i in range(5)
    )  # fmt: skip

    def end(sign):
        return lambda p: jnp.stack([sign * p["L"] / 2, 0.0 * p["L"], 0.0 * p["L"]])

    joints = []
    for k in range(6):
        axis = np.cross(CORNERS[k] - CORNERS[k - 1], CORNERS[(k + 1) % 6] - CORNERS[k])
        if k == 0:
            a, point_a, axis_a = lb.GROUND_3D, _floats(CORNERS[0]), _floats(axis)
        else:
            a, point_a, axis_a = bars[k - 1], end(1.0), _floats(frames[k - 1].T @ axis)
        if k == 5:
            b, point_b, axis_b = lb.GROUND_3D, _floats(CORNERS[5]), _floats(axis)
        else:
            b, point_b, axis_b = bars[k], end(-1.0), _floats(frames[k].T @ axis)
        joints.append(lb.Hinge(a, point_a, b, point_b, axis_a, axis_b, name=f"R{k}"))
    joints = tuple(joints)
    system = lb.assemble(bars, joints, gravity=lambda p: jnp.stack([0.0, -p["g"], 0.0]))
    params = {"m": 1.0, "L": 1.0, "g": 9.81}
    q = []
    for i in range(5):
        q += list((CORNERS[i] + CORNERS[i + 1]) / 2) + list(_quaternion(frames[i]))
    q = np.asarray(q)
    # The direction of motion: the null space of J at the start (rank 34 of 35).
    jac = jax.jacfwd(lambda q_: system.constraints(0.0, q_, params))(jnp.asarray(q))
    direction = np.linalg.svd(np.asarray(jac))[2][-1]
    tips = [np.linalg.norm(direction[7 * i : 7 * i + 3]) for i in range(5)]
    qd = direction / max(tips) * np.sign(direction[np.argmax(np.abs(direction))])

    def points(t, q_, p):
        ends = [bars[0].position(q_, p, end(-1.0))]
        ends += [bar.position(q_, p, end(1.0)) for bar in bars]
        return jnp.stack([cabinet(r) for r in ends])

    forces = lb.joint_forces(bars, joints)

    def constraint_forces(t, q_, lam, p):
        where, f = forces(t, q_, lam, p)
        return jax.vmap(cabinet)(where), jax.vmap(cabinet)(f)

    return Model(
        name="bricard",
        description="Bricard's overconstrained 6R linkage: redundant constraint, "
        "slender bars",
        system=system,
        params=params,
        coordinates=tuple(f"{c}{i}" for i in range(5) for c in NAMES),
        units=("m", "m", "m", "", "", "", "") * 5,
        constraint_names=lb.constraint_labels(bars, joints),
        multiplier_units=lb.multiplier_units(bars, joints),
        q_guess=tuple(float(x) for x in q),
        qd_guess=tuple(float(x) for x in qd),
        fixed_q=tuple(range(35)),
        # One speed kept, the others solved: exact in float64 whatever precision
        # the direction above was found in.
        fixed_qd=(int(np.argmax(np.abs(qd))),),
        points=points,
        constraint_forces=constraint_forces,
        segments=tuple((i, i + 1) for i in range(5)),
        conservative=True,
    )
