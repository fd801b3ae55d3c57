"""Fitting and trajectory optimisation on top of the engine (docs/optimisation.md).

The engine never imports this package; it imports the engine.
"""

from ._control import (
    ControlResult as ControlResult,
    optimize_controls as optimize_controls,
)
from ._fit import (
    FitResult as FitResult,
    fit as fit,
    relative_squared_error as relative_squared_error,
)
