"""`from_sympy`: a Lagrangian, constraints and forces written with SymPy
(`sympy.physics.mechanics` dynamicsymbols) as a lagrax System of JAX functions."""

from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp

from ._system import System


def _sympy():
    try:
        import sympy
        from sympy.physics import mechanics
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "from_sympy: needs SymPy: pip install sympy (or pip install "
            "'lagrax[import]')."
        ) from e
    return sympy, mechanics


class _Lambdified:
    """A SymPy expression (or list of them) as f(t, q, qd, params) in JAX."""

    def __init__(self, fn, keys, vector, caller):
        self.fn, self.keys, self.vector, self.caller = fn, keys, vector, caller

    def __call__(self, t, q, qd, params):
        missing = [k for k in self.keys if k not in params]
        if missing:
            raise KeyError(
                f"from_sympy: params has no {missing[0]!r}, a symbol of the "
                f"{self.caller}; pass it in params (or map the symbol with "
                "params= to another key)."
            )
        values = self.fn(t, *q, *qd, *(params[k] for k in self.keys))
        if self.vector:
            return jnp.stack([jnp.asarray(v, q.dtype) for v in values])
        return jnp.asarray(values, q.dtype)


def from_sympy(
    lagrangian,
    q: Sequence,
    *,
    constraints: Sequence | None = None,
    forces: Sequence | None = None,
    params: Mapping | None = None,
    t=None,
) -> System:
    """A [`lagrax.System`][] from SymPy expressions.

    Write the model with `sympy.physics.mechanics`: coordinates as
    `dynamicsymbols`, their rates as `q.diff(t)`, parameters as plain symbols.
    Each expression becomes a JAX function (SymPy's `lambdify` with the `jax`
    module), so lagrax differentiates it as it does hand-written code.

    **Arguments:**

    - `lagrangian`: L as a SymPy expression in the coordinates, their first
        derivatives, t and parameter symbols.
    - `q`: the generalized coordinates, a sequence of `dynamicsymbols`; their
        order is q's.
    - `constraints`: holonomic constraints phi(t, q) = 0, SymPy expressions.
    - `forces`: the non-conservative generalized forces Q(t, q, qd), one
        expression per coordinate.
    - `params`: which `params` key each parameter symbol reads, `{symbol: key}`;
        a symbol not listed reads the key of its name.
    - `t`: the time symbol; default `sympy.physics.mechanics.dynamicsymbols._t`.

    **Returns:**

    A `System` whose functions read `params[key]` for each parameter symbol.
    """
    sympy, mechanics = _sympy()
    t = mechanics.dynamicsymbols._t if t is None else t
    q = list(q)
    if not q:
        raise ValueError("from_sympy: q must list at least one coordinate.")
    n = len(q)
    q_plain = sympy.symbols(f"q0:{n}", real=True)
    qd_plain = sympy.symbols(f"qd0:{n}", real=True)
    # Rates first: q_i(t).diff(t) contains q_i(t).
    rates = {qi.diff(t): s for qi, s in zip(q, qd_plain, strict=True)}
    coords = {qi: s for qi, s in zip(q, q_plain, strict=True)}
    known = set(q_plain) | set(qd_plain) | {t}
    names = dict(params or {})

    def plain(expr, caller):
        expr = sympy.sympify(expr).subs(rates).subs(coords)
        left = expr.atoms(sympy.Derivative) | {
            f for f in expr.atoms(sympy.Function) if f.args == (t,)
        }
        if left:
            raise ValueError(
                f"from_sympy: the {caller} contains {sorted(map(str, left))[0]}, "
                "which is neither a coordinate of q nor its first derivative; add "
                "it to q (second derivatives belong to no Lagrangian)."
            )
        return expr

    def lambdify(exprs, caller, vector):
        exprs = [plain(e, caller) for e in exprs]
        free = set().union(*(e.free_symbols for e in exprs)) - known
        symbols = sorted(free, key=str)
        keys = tuple(str(names.get(s, s.name)) for s in symbols)
        fn = sympy.lambdify(
            [t, *q_plain, *qd_plain, *symbols],
            exprs if vector else exprs[0],
            modules="jax",
        )
        return _Lambdified(fn, keys, vector, caller)

    lagrangian_fn = lambdify([lagrangian], "Lagrangian", False)
    system_kwargs: dict[str, Any] = {}
    if constraints is not None:
        constraints = [plain(c, "constraints") for c in constraints]
        if any(c.free_symbols & set(qd_plain) for c in constraints):
            raise ValueError(
                "from_sympy: the constraints contain rates of q; from_sympy reads "
                "holonomic constraints phi(t, q) = 0 only."
            )
        rows = lambdify(constraints, "constraints", True)
        system_kwargs["constraints"] = lambda t_, q_, p: rows(t_, q_, q_ * 0, p)
    if forces is not None:
        forces = list(forces)
        if len(forces) != n:
            raise ValueError(
                f"from_sympy: forces must give one expression per coordinate "
                f"({n}), got {len(forces)}."
            )
        system_kwargs["forces"] = lambdify(forces, "forces", True)
    return System(lagrangian_fn, **system_kwargs)
