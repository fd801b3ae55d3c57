"""Type aliases shared across lagrax."""

from collections.abc import Callable
from typing import Any, TypeAlias

from jaxtyping import Array, ArrayLike, Float, PyTree, Real


Params: TypeAlias = PyTree[Any]
"""Any pytree of arrays and floats; every array in it is differentiable."""

RealScalarLike: TypeAlias = float | int | Real[ArrayLike, ""]
Vector: TypeAlias = Float[Array, " n"]

LagrangianFn: TypeAlias = Callable[[Any, Any, Any, Params], Any]
"""`lagrangian(t, q, qd, params) -> scalar`."""
ConstraintFn: TypeAlias = Callable[[Any, Any, Params], Any]
"""`constraints(t, q, params) -> (m,)`."""
ForceFn: TypeAlias = Callable[[Any, Any, Any, Params], Any]
"""`forces(t, q, qd, params) -> (n,)`."""
VelocityConstraintFn: TypeAlias = Callable[[Any, Any, Any, Params], Any]
"""`velocity_constraints(t, q, qd, params) -> (k,)`, affine in qd: A qd + b."""
