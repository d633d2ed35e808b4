"""The integer a C++ constant expression in a source file stands for, where the file alone settles it.

A launch's dynamic shared memory is written as an expression: `96 * 1024`, `SMEM_BYTES`,
`STAGES * (BM + BN) * BK * sizeof(half)`. Its names are read from what the file (blanked: comments and strings
are spaces) and the project headers it includes define once: an object-like `#define NAME expr`, a
`[static] [constexpr|const] <integer type> NAME = expr;` (also `{expr}` and `(expr)` initialisers), or a plain
`int NAME = expr;` that nothing assigns again. `sizeof` of the built-in and CUDA vector types is known; the
arithmetic is C's on integers (`/` truncates, shifts, `%`, bitwise operators, the ternary operator on a
settled condition), integer suffixes (`u`, `l`, `ull`) and casts to an integer type allowed. Anything else (a
function call, a template parameter, a name defined twice with two values, a run-time variable) leaves the
expression unsettled: None, never a guess.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

# Bytes of the types `sizeof` is asked of in shared-memory sizes.
SIZES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2, "nv_bfloat16": 2,
    "__nv_bfloat16": 2, "cutlass::half_t": 2, "cutlass::bfloat16_t": 2, "at::Half": 2, "at::BFloat16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4, "half2": 4, "__half2": 4,
    "nv_bfloat162": 4, "__nv_bfloat162": 4,
    "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "size_t": 8, "double": 8, "float2": 8,
    "int2": 8, "uint2": 8, "long": 8, "unsigned long": 8,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16,
}

_INTEGER_TYPE = (r"(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|short|char|size_t|u?int(?:8|16|32|64)_t|"
                 r"unsigned|auto|index_t|uint)")
# `[static] [inline] (constexpr|const) <type> NAME = expr;` and `constexpr static ...`; `{expr}` and `(expr)` too.
_DECLARED = re.compile(r"(?:\b(?:static|inline|constexpr|const|__device__|__host__|__constant__)\s+)*"
                       r"\b" + _INTEGER_TYPE + r"\s+(?:const\s+)?(?P<name>[A-Za-z_]\w*)\s*"
                       r"(?:=\s*(?P<value>[^;{}]+?)|\{(?P<braced>[^;{}]*)\}|\((?P<paren>[^;{}]*)\))\s*;")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![\w(])(?P<value>(?:[^\n]*\\\n)*[^\n]*)",
                     re.MULTILINE)
_SIZEOF = re.compile(r"\bsizeof\s*\(\s*([A-Za-z_][\w:\s]*?)\s*\)")
_CAST = re.compile(r"\(\s*(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|size_t|u?int(?:32|64)_t|unsigned)"
                   r"\s*\)|\b(?:static_cast\s*<[^<>]*>)")
_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")
_TERNARY = re.compile(r"^(?P<test>[^?:]+)\?(?P<yes>[^?:]+):(?P<no>[^?:]+)$")
_LIMIT = 1 << 40  # a shared-memory size beyond this is not one: not settled


class Constants:
    """The names one file's text (with its headers') defines once, and the integers expressions of them give."""

    def __init__(self, texts: Iterable[str] | Callable[[], Iterable[str]]) -> None:
        """`texts`: the texts (blanked), or a function giving them, called once an expression names a constant."""
        self.texts = texts
        self._text: dict[str, str] | None = None
        self.values: dict[str, int | None] = {}

    @property
    def text(self) -> dict[str, str]:
        """Each name the texts define once, with the text of its value."""
        if self._text is None:
            self._text = _defined(self.texts() if callable(self.texts) else self.texts)
        return self._text

    def value(self, expression: str) -> int | None:
        """The integer `expression` gives, or None where the file does not settle it."""
        return _evaluate(expression, self._name, set())

    def _name(self, name: str, seen: set[str]) -> int | None:
        if name in self.values:
            return self.values[name]
        text = self.text.get(name)
        if text is None or name in seen:
            return None
        result = _evaluate(text, self._name, seen | {name})
        self.values[name] = result
        return result


def _defined(texts: Iterable[str]) -> dict[str, str]:
    """The names `texts` define once (`Constants`), with the text of each one's value."""
    found: dict[str, set[str]] = {}
    assigned: set[str] = set()
    for code in texts:
        for match in _DEFINE.finditer(code):
            found.setdefault(match.group("name"), set()).add(_squeeze(match.group("value")))
        for match in _DECLARED.finditer(code):
            value = match.group("value") or match.group("braced") or match.group("paren")
            if value is not None and value.strip():
                found.setdefault(match.group("name"), set()).add(_squeeze(value))
        if "=" in code:
            assigned.update(m.group(1) for m in _ASSIGNED.finditer(code))
    # A name with two definitions of different text, or assigned after its declaration, has no one value.
    return {name: next(iter(values)) for name, values in found.items() if len(values) == 1 and name not in assigned}


# An assignment after the declaration: `name = `, `name += ` and the like, not `==` and not a declaration's own `=`
# (a declaration is `<type> name =`: the word before the name is a type, which this does not tell apart; the
# pattern asks for a statement start before the name instead).
_ASSIGNED = re.compile(r"(?:^|[;{}]|\)\s)\s*([A-Za-z_]\w*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", re.MULTILINE)


def _squeeze(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def _evaluate(expression: str, name: object, seen: set[str]) -> int | None:
    text = _squeeze(expression)
    if not text:
        return None
    text = _SIZEOF.sub(_sizeof, text)
    if "sizeof" in text:
        return None
    text = _CAST.sub(" ", _SUFFIX.sub(r"\1", text))
    text = text.replace("&&", " and ").replace("||", " or ").replace("!=", " != ")
    text = re.sub(r"!(?!=)", " not ", text)
    ternary = _TERNARY.match(text.strip())
    try:
        if ternary:
            test = _evaluate(ternary.group("test"), name, seen)
            if test is None:
                return None
            return _evaluate(ternary.group("yes" if test else "no"), name, seen)
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    try:
        result = _Evaluator(name, seen).visit(tree.body)
    except _Unsettled:
        return None
    if isinstance(result, bool):
        return int(result)
    return result if isinstance(result, int) and -_LIMIT < result < _LIMIT else None


def _sizeof(match: re.Match[str]) -> str:
    size = SIZES.get(" ".join(match.group(1).split()))
    return str(size) if size is not None else "sizeof"


class _Unsettled(Exception):
    pass


_OPERATORS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitOr: lambda a, b: a | b,
    ast.BitAnd: lambda a, b: a & b, ast.BitXor: lambda a, b: a ^ b,
}
_COMPARISONS = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
}


class _Evaluator(ast.NodeVisitor):
    """C's integer arithmetic on the parsed expression; any other node is unsettled."""

    def __init__(self, name: object, seen: set[str]) -> None:
        self.name, self.seen = name, seen

    def generic_visit(self, node: ast.AST) -> int:
        raise _Unsettled

    def visit_Constant(self, node: ast.Constant) -> int:
        if type(node.value) is not int:
            raise _Unsettled
        return node.value

    def visit_Name(self, node: ast.Name) -> int:
        lookup = self.name
        value = lookup(node.id, self.seen) if callable(lookup) else None
        if value is None:
            raise _Unsettled
        return int(value)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> int:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Invert):
            return ~value
        if isinstance(node.op, ast.Not):
            return int(not value)
        raise _Unsettled

    def visit_BinOp(self, node: ast.BinOp) -> int:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            if right == 0:
                raise _Unsettled
            quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)  # C truncates
            return quotient if not isinstance(node.op, ast.Mod) else left - quotient * right
        operator = _OPERATORS.get(type(node.op))
        if operator is None or (isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= right < 64):
            raise _Unsettled
        return int(operator(left, right))

    def visit_BoolOp(self, node: ast.BoolOp) -> int:
        values = [self.visit(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))

    def visit_Compare(self, node: ast.Compare) -> int:
        left = self.visit(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            compare = _COMPARISONS.get(type(op))
            if compare is None or not compare(left, right):
                return 0
            left = right
        return 1

