"""lagrax: differentiable simulation of constrained mechanical systems in JAX."""

import importlib.metadata

from . import bodies as bodies, systems as systems
from ._batch import (
    simulate_batch as simulate_batch,
    use_cpu_devices as use_cpu_devices,
)
from ._control import (
    AbstractControl as AbstractControl,
    CubicSpline as CubicSpline,
    PiecewiseConstant as PiecewiseConstant,
    PiecewiseLinear as PiecewiseLinear,
    saturate as saturate,
)
from ._dynamics import accelerations as accelerations
from ._initial import consistent_state as consistent_state
from ._mechanics import (
    AbstractLagrangian as AbstractLagrangian,
    Mechanics as Mechanics,
    energy as energy,
    mechanics as mechanics,
)
from ._model import Model as Model
from ._results import RESULTS as RESULTS
from ._saddle import (
    AbstractSaddleSolver as AbstractSaddleSolver,
    AugmentedLagrangian as AugmentedLagrangian,
    DenseLU as DenseLU,
    LeastSquares as LeastSquares,
    SaddleSolution as SaddleSolution,
    SchurCholesky as SchurCholesky,
)
from ._simulate import simulate as simulate
from ._singular import SingularLimit as SingularLimit
from ._solvers import RK4 as RK4
from ._stabilization import (
    AbstractStabilization as AbstractStabilization,
    Baumgarte as Baumgarte,
    NoStabilization as NoStabilization,
    Projection as Projection,
)
from ._sweep import (
    Sweep as Sweep,
    default_save as default_save,
    load_sweep as load_sweep,
    sweep as sweep,
)
from ._sympy import from_sympy as from_sympy
from ._system import System as System
from ._threads import widen_cpu_pool as _widen_cpu_pool
from ._trajectory import Trajectory as Trajectory
from .bodies import body_torque as body_torque, point_force as point_force
from .optimize import (
    ControlResult as ControlResult,
    FitResult as FitResult,
    fit as fit,
    optimize_controls as optimize_controls,
    relative_squared_error as relative_squared_error,
)


__version__ = importlib.metadata.version("lagrax")


# Importing lagrax starts no JAX backend, so this comes before the CPU backend
# starts: see _threads.py (a hang in jaxlib < 0.11.2's batched LAPACK kernels on
# machines with few cores).
_widen_cpu_pool()
