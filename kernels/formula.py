"""Small, safe arithmetic formulas over case parameters ("ceil_div(n, 256)", "2*M*N*K").

Problem files and learners write launch shapes and FLOP/byte counts as formulas; they
are evaluated with a whitelist of AST nodes, never with eval().
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any


class FormulaError(ValueError):
    pass


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ceil_div": _ceil_div,
    "cdiv": _ceil_div,
    "min": min,
    "max": max,
    "int": int,
    "float": float,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "next_pow2": lambda x: 1 << max(0, (int(x) - 1).bit_length()),
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


@lru_cache(maxsize=1024)
def _parse(text: str) -> ast.Expression:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"cannot parse formula {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.BinOp,
            ast.UnaryOp,
            ast.USub,
            ast.UAdd,
            ast.Constant,
            ast.Name,
            ast.Load,
            ast.Call,
            *_BINOPS,
        )
        if not isinstance(node, allowed):
            raise FormulaError(f"formula {text!r} uses {type(node).__name__}, which is not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise FormulaError(f"formula {text!r} has a non-numeric constant")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        ):
            raise FormulaError(f"formula {text!r} calls something other than {sorted(FUNCTIONS)}")
    return tree


def names(text: str) -> set[str]:
    """The free variable names a formula uses."""
    tree = _parse(str(text))
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}  # type: ignore[attr-defined]
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(text: str | int | float, env: Mapping[str, int | float]) -> int | float:
    if isinstance(text, int | float):
        return text
    tree = _parse(str(text))

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise FormulaError(f"formula {text!r} uses unknown name {node.id!r}")
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise FormulaError(f"exponent too large in {text!r}")
            try:
                return _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise FormulaError(f"division by zero in {text!r}") from None
        if isinstance(node, ast.Call):
            func = FUNCTIONS[node.func.id]  # type: ignore[attr-defined]
            return func(*[ev(a) for a in node.args])
        raise FormulaError(f"unsupported expression in {text!r}")

    return ev(tree)


def evaluate_int(text: str | int, env: Mapping[str, int | float]) -> int:
    value = evaluate(text, env)
    if isinstance(value, float):
        if not value.is_integer():
            raise FormulaError(f"formula {text!r} must give a whole number, got {value}")
        value = int(value)
    return int(value)
