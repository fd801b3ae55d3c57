"""Classic index-3 benchmarks against their published reference solutions.

Both come from the Test Set for IVP Solvers (F. Mazzia, C. Magherini, Bari), in
the form of Hairer & Wanner, Solving ODEs II, sect. VII.7; lagrax ships them as
`lx.systems.andrews()` and `lx.systems.car_axis()`, written with the public API.
The test set writes Andrews as M q'' = f - G^T lam (its multipliers are minus
ours) and the car axis as M q'' = f + G^T lam (ours). The reference velocities,
accelerations and multipliers of these index-3 problems are less accurate than
the positions (the test set scores positions only for Andrews); the tolerances
below follow that.
"""

import numpy as np
import pytest

import lagrax as lx


ANDREWS = lx.systems.andrews()
CAR = lx.systems.car_axis()

# y(t = 0.03): positions, velocities, accelerations, multipliers (PSIDE, 1e-14).
ANDREWS_REF = np.array([
    0.1581077119629904e2, -0.1575637105984298e2, 0.4082224013073101e-1,
    -0.5347301163226948e0, 0.5244099658805304e0, 0.5347301163226948e0,
    0.1048080741042263e1, 0.1139920302151208e4, -0.1424379294994111e4,
    0.1103291221937134e2, 0.1929337464421385e2, 0.5735699284790808e0,
    -0.1929337464421385e2, 0.3231791658026955e0, -0.2463176316945196e5,
    0.5185037701610329e5, 0.3241025686413781e6, 0.5667493645176213e6,
    0.1674362929479361e5, -0.5667493645176222e6, 0.9826520791458422e4,
    0.1991753333731910e3, -0.2975531228015052e2, 0.2306654119098399e2,
    0.3145271365475927e2, 0.2264249232082739e2, 0.1161740700019673e2,
])  # fmt: skip

# y(t = 3): positions, velocities, multipliers.
CAR_REF = np.array([
    0.4934557842755629e-1, 0.4969894602303324e0, 0.1041742524885400e1,
    0.3739110272652214e0, -0.7705836840321485e-1, 0.7446866596327776e-2,
    0.1755681574942899e-1, 0.7703410437794031e0, -0.4736886750784630e-2,
    -0.1104680411345730e-2,
])  # fmt: skip


def test_andrews_initial_accelerations_and_multipliers():
    q0, qd0 = ANDREWS.initial_state()
    np.testing.assert_allclose(q0, ANDREWS.q_guess, atol=1e-15)  # consistent already
    qdd, lam = lx.accelerations(ANDREWS.system, 0.0, q0, qd0, ANDREWS.params)
    # The test set's consistent initial values.
    np.testing.assert_allclose(
        qdd, [14222.4439199541138705911625887, -10666.8329399655854029433719415,
              0, 0, 0, 0, 0], rtol=1e-12, atol=1e-9,
    )  # fmt: skip
    np.testing.assert_allclose(
        -lam, [98.5668703962410896057654982170, -6.12268834425566265503114393122,
               0, 0, 0, 0], rtol=1e-12, atol=1e-11,
    )  # fmt: skip


def test_andrews_at_t_003():
    q0, qd0 = ANDREWS.initial_state()
    sol = lx.simulate(
        ANDREWS.system, q0, qd0, ANDREWS.params, t1=0.03, rtol=1e-10, atol=1e-10
    )
    ref = ANDREWS_REF
    np.testing.assert_allclose(sol.q[-1], ref[:7], rtol=1e-9)
    np.testing.assert_allclose(sol.qd[-1], ref[7:14], rtol=2e-7)
    np.testing.assert_allclose(sol.qdd[-1], ref[14:21], rtol=1e-5)
    np.testing.assert_allclose(-sol.multipliers[-1], ref[21:], rtol=1e-5)


def test_car_axis_initial_state_is_the_test_sets():
    q0, qd0 = CAR.initial_state()
    np.testing.assert_allclose(q0, [0.0, 0.5, 1.0, 0.5], atol=1e-16)
    np.testing.assert_allclose(qd0, [-0.5, 0.0, -0.5, 0.0], atol=1e-16)


@pytest.mark.parametrize("stabilization", ["projection", "none", "baumgarte"])
def test_car_axis_at_t_3(stabilization):
    stab = {
        "projection": lx.Projection(),
        "none": lx.NoStabilization(),
        "baumgarte": lx.Baumgarte(10.0, 10.0),
    }[stabilization]
    q0, qd0 = CAR.initial_state()
    sol = lx.simulate(
        CAR.system, q0, qd0, CAR.params, t1=3.0, rtol=1e-10, atol=1e-10,
        stabilization=stab,
    )  # fmt: skip
    ref = CAR_REF
    np.testing.assert_allclose(sol.q[-1], ref[:4], rtol=2e-9)
    np.testing.assert_allclose(sol.qd[-1], ref[4:8], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sol.multipliers[-1], ref[8:], rtol=1e-6, atol=1e-9)
    if stabilization == "projection":
        assert np.abs(np.asarray(sol.phi)).max() < 1e-13
