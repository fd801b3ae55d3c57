"""The N-four-bar mechanism (IFToMM multibody benchmark A02): singular twice a turn.

N parallelogram loops side by side: N + 1 cranks pinned to the ground one link
length apart, each pair of neighbours joined at their tips by a coupler. All 2N + 1
links are uniform bars of the same mass and length. The mechanism has one degree of
freedom, but whenever the cranks are horizontal every bar lies on one line: the
constraint Jacobian loses N ranks there, and the linkage could leave its
parallelogram branch for a crossed one (the degrees of freedom jump from 1 to
N + 1 for an instant). On the parallelogram branch every crank keeps the same
angle theta and every coupler translates, so the motion is that of a single
pendulum (`exact_motion`), which the tests compare against.

References: the IFToMM benchmark library, problem A02 "N-four-bar mechanism"
(Gonzalez, Dopico, Lugris, Cuadrado, "A benchmarking system for MBS simulation
software", Multibody Syst. Dyn. 16 (2006) 179-190); E. Bayo, A. Avello,
"Singularity-free augmented Lagrangian algorithms for constrained multibody
dynamics", Nonlinear Dyn. 5 (1994) 209-231.
"""

import math

import jax.numpy as jnp
import numpy as np

from .. import bodies as lb
from .._model import Model
from ._rods import rod_end


def _rod(index):
    return lb.PlanarBody(index, "m", lambda p: p["m"] * p["L"] ** 2 / 12)


def _parts(n: int):
    cranks = tuple(_rod(3 * i) for i in range(n + 1))
    couplers = tuple(_rod(3 * (n + 1 + i)) for i in range(n))
    joints = []
    for i, crank in enumerate(cranks):
        ground = (lambda i_: lambda p: jnp.stack([i_ * p["L"], 0.0 * p["L"]]))(i)
        joints.append(
            lb.Revolute(lb.GROUND, ground, crank, rod_end("L", -1), name=f"O{i}")
        )
    for i, coupler in enumerate(couplers):
        joints.append(
            lb.Revolute(cranks[i], rod_end("L", 1), coupler, rod_end("L", -1),
                        name=f"B{i}")
        )  # fmt: skip
        joints.append(
            lb.Revolute(cranks[i + 1], rod_end("L", 1), coupler, rod_end("L", 1),
                        name=f"C{i}")
        )  # fmt: skip
    return cranks + couplers, tuple(joints)


def state_at(n: int, theta: float, omega: float, length: float = 1.0):
    """(q, qd) on the parallelogram branch at crank angle theta and rate omega."""
    c, s = math.cos(theta), math.sin(theta)
    q, qd = [], []
    for i in range(n + 1):
        q += [length * (i + c / 2), length * s / 2, theta]
        qd += [-length * s / 2 * omega, length * c / 2 * omega, omega]
    for i in range(n):
        q += [length * (i + 0.5 + c), length * s, 0.0]
        qd += [-length * s * omega, length * c * omega, 0.0]
    return tuple(q), tuple(qd)


def exact_motion(n: int, params, ts, theta0: float = 0.0, omega0: float = 1.0):
    """The crank angle theta(ts) and energy of the parallelogram branch, from its
    one-degree-of-freedom equation solved by scipy to 1e-13: with all cranks at
    theta, T = (I_c (N + 1) / 2 + m L^2 N / 2) theta'^2 (cranks turn about their
    pins, I_c = m L^2 / 3; couplers translate) and V = m g L sin(theta)
    ((N + 1) / 2 + N). Needs scipy (a test dependency)."""
    from scipy.integrate import solve_ivp

    m, length, g = params["m"], params["L"], params["g"]
    inertia = m * length**2 * ((n + 1) / 3 + n)
    weight = m * g * length * ((n + 1) / 2 + n)
    sol = solve_ivp(
        lambda t, y: [y[1], -weight * math.cos(y[0]) / inertia],
        (0.0, float(ts[-1])),
        [theta0, omega0],
        t_eval=np.asarray(ts, dtype=float),
        rtol=1e-13,
        atol=1e-14,
        method="DOP853",
    )
    theta, omega = sol.y
    energy = 0.5 * inertia * omega**2 + weight * np.sin(theta)
    return theta, energy


def n_four_bar(n: int = 2) -> Model:
    """N parallelogram loops of unit bars, cranks horizontal at the start.

    2N + 1 uniform bars (mass m = 1 kg, length L = 1 m, I = m L^2 / 12) in
    absolute coordinates (x, y, theta) of each mass centre: 3 (2N + 1)
    coordinates, 2 (3N + 1) pin rows, one degree of freedom. Gravity g along -y.
    Starts at a singular configuration, every bar on the x axis, the cranks
    turning at 1 rad/s: simulate it with `saddle_solver=lx.AugmentedLagrangian()`
    (the other solvers stop there, or leave the branch).
    """
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n_four_bar(n={n!r}): n, the number of loops, must be >= 1.")
    bodies, joints = _parts(n)
    params = {"m": 1.0, "L": 1.0, "g": 9.81}
    q_guess, qd_guess = state_at(n, 0.0, 1.0)
    names = [f"{c}{i}" for i in range(n + 1) for c in ("x_c", "y_c", "th_c")]
    names += [f"{c}{i}" for i in range(n) for c in ("x_b", "y_b", "th_b")]

    def points(t, q, p):
        # Ground pins 0..N, then crank tips 0..N.
        tips = [crank.position(q, p, rod_end("L", 1)) for crank in bodies[: n + 1]]
        pins = [jnp.stack([i * p["L"], 0.0 * p["L"]]).astype(q.dtype)
                for i in range(n + 1)]  # fmt: skip
        return jnp.stack(pins + tips)

    cranks = tuple((i, n + 1 + i) for i in range(n + 1))
    couplers = tuple((n + 1 + i, n + 2 + i) for i in range(n))
    return Model(
        name="n_four_bar",
        description=f"N-four-bar (IFToMM A02), {n} parallelogram loops, singular "
        "when flat",
        system=lb.assemble(bodies, joints, gravity=lambda p: jnp.stack([0.0, -p["g"]])),
        params=params,
        coordinates=tuple(names),
        units=("m", "m", "rad") * (2 * n + 1),
        constraint_names=lb.constraint_labels(bodies, joints),
        multiplier_units=lb.multiplier_units(bodies, joints),
        q_guess=q_guess,
        qd_guess=qd_guess,
        # Exactly on the branch already: every coordinate kept.
        fixed_q=tuple(range(len(q_guess))),
        fixed_qd=tuple(range(len(q_guess))),
        points=points,
        constraint_forces=lb.joint_forces(bodies, joints),
        segments=cranks + couplers,
        conservative=True,
    )
