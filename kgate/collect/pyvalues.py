"""The classes a run-time value of a kernel launch falls in, what a name alone says of one, and what an expression
says of a tensor's shape: shared by the launch-site reading (`kgate.collect.pylaunch`) and the rules that judge
what it finds (KG201, KG108).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kgate.collect import pysource as py

BOUNDED, MODEL, UNKNOWN, RUNTIME = range(4)

# Functions whose result takes few values whatever their argument (by the last part of the name).
BUCKETING_FUNCTIONS = frozenset({"next_power_of_2", "next_power_of_two", "next_pow2", "bit_length", "log2",
                                 "ilog2", "element_size", "dim", "is_contiguous"})

BUCKETING_PARTS = ("bucket", "pow2", "power_of_2", "power_of_two")

# Dividing a token count by this much or more leaves at most 64 values below a million tokens.
COARSE_DIVISOR = 1 << 14
# A size the launching function refuses above this many (`if q_len > 16: raise ...`), or a call picks the launcher
# only under (`decode if q_len <= 16 else prefill`), takes a few values at most, as many as the powers of two a
# bucketed size takes over every shape.
FEW_VALUES = 64

DIVIDERS = frozenset({"cdiv", "ceil_div", "ceildiv", "div_up", "divup", "ceil_divide"})

SAME = frozenset({"int", "abs", "float", "round", "ceil", "floor", "index"})

# A weight, a bias, a scale, or its gradient, by the tensor's name (numbered too: an expert layer's `w1`, `w13`).
_POOL = re.compile(r"(?i)(?:^|_)pools?(?:_|$)")
_WEIGHT = re.compile(r"(?i)^(d?w\d*|d?w\d*_.*|.*weight.*|.*_w|d?bias|db|(.*_)?scales?(_.*)?)$")

# What a device reports about itself (fixed per machine): an attribute or a function by its last name.
DEVICE = re.compile(r"(?i)(multi_?processor|device_propert|device_count$|(^|_)(sm|sms|core|cores|eu|cu)_count$"
                     r"|(^|_)num_(sms|cores|cus)$)")

CONFIG = frozenset({"self", "config", "cfg", "model_config", "args", "hparams"})

# What a tensor is an attribute of when the module built it at construction (a parameter, a buffer, a table).
OWNER = frozenset({"self", "cls"})

class Why:
    """The expression that decided a verdict, rendered only if a finding shows it."""

    __slots__ = ("after", "before", "node")

    def __init__(self, node: ast.AST, before: str = "", after: str = "") -> None:
        self.node, self.before, self.after = node, before, after

    def __str__(self) -> str:
        return f"{self.before}{written(self.node)}{self.after}"

@dataclass(frozen=True)
class Verdict:
    cls: int
    why: str | Why = ""  # what decided: a name, or the expression as written

NOTHING = Verdict(BOUNDED)

def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: v.cls) if verdicts else Verdict(UNKNOWN)

def best(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=lambda v: v.cls) if verdicts else Verdict(UNKNOWN)

# The size of a dimension named by one letter (`m_size`, `M_SIZE`, `size_k`).
_LETTER_SIZE = re.compile(r"(?i)([a-z])_size|size_([a-z])")

# Words that name the channels (or features) of a tensor laid out channels first: the dimensions after them are
# its spatial extents or its length (`batch, in_feat_dim, in_height, in_width = x.shape`, `N, C, L = x.shape`).
CHANNEL_PARTS = frozenset({"channel", "channels", "chan", "chans", "feat", "feats", "feature", "features"})

class Names:
    """The class a name alone suggests, for values no launch site shows (documented in KG201)."""

    RUNTIME_PARTS = frozenset({"token", "tokens", "seq", "seqlen", "seqlens", "batch", "bs", "bsz", "rows", "ctx",
                               "lens", "lengths", "indices", "spatial"})
    MODEL_PARTS = frozenset({"dim", "dims", "hidden", "head", "heads", "vocab", "expert", "experts", "features",
                             "channels", "embd", "embed", "intermediate", "model", "nh"})

    # Words run together without a separator (`headdim`, `hdim`, `nheads`, `maxlen`) end in one of these.
    RUNTIME_ENDINGS = ("seqlen", "seqlens", "tokens", "len", "lens", "batch")
    MODEL_ENDINGS = ("dim", "dims", "head", "heads")
    # A size of something the layer or the kernel fixes (`chunk_size`, `page_size`, `group_size`).
    SETTING_PARTS = frozenset({"chunk", "block", "page", "group", "window", "tile"})
    FLAG_PARTS = frozenset({"is", "has", "use", "uses", "enable", "with"})
    # A stride along a dimension is not that dimension's size (`stride_tokens` is the width of a token's row).
    STRIDE_PARTS = frozenset({"stride", "strides"})

    def __init__(self, runtime: set[str], model: set[str]) -> None:
        self.runtime = runtime
        self.model = model

    def of(self, name: str) -> int:
        if name in self.runtime:
            return RUNTIME
        if name in self.model:
            return MODEL
        letter = _LETTER_SIZE.fullmatch(name)
        if letter is not None:  # `m_size`, `SIZE_K`: the size the letter names, as the letter alone is read
            upper = (letter.group(1) or letter.group(2)).upper()
            if upper in self.runtime or upper in self.model:
                return RUNTIME if upper in self.runtime else MODEL
        parts = {p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)}
        if "bucket" in parts or "buckets" in parts:
            return BOUNDED
        if parts & self.STRIDE_PARTS:
            return UNKNOWN
        if parts & self.FLAG_PARTS:
            return UNKNOWN  # `IS_VARLEN`, `USE_CU_SEQLENS`: a flag, whatever its other words name
        if parts & self.RUNTIME_PARTS:
            return RUNTIME
        if parts & self.MODEL_PARTS:
            return MODEL
        if any(p.endswith(self.RUNTIME_ENDINGS) for p in parts):
            return RUNTIME
        if any(p.endswith(self.MODEL_ENDINGS) for p in parts) or (
                "size" in parts and parts & self.SETTING_PARTS):
            return MODEL
        return UNKNOWN

    def hint(self, name: str) -> int:
        """What the name's words alone suggest (the configured names included), whatever `of` is made to say:
        whether a divisor kgate cannot place may itself be a run-time size."""
        return Names.of(self, name)

def shape_of(expr: ast.expr) -> tuple[ast.expr, bool, bool] | None:
    """A tensor's shape (`x.shape`, `x.size()`, `ctx.input_shape`, a slice of one, or one copied into a tuple or
    a list: `tuple(x.shape)`): (the tensor, whether its first item is the tensor's first dimension, whether its
    last is the last)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("tuple", "list") \
            and len(expr.args) == 1 and not expr.keywords:
        return shape_of(expr.args[0])
    if isinstance(expr, ast.Attribute) and (expr.attr == "shape" or expr.attr.endswith("_shape")):
        return expr.value, True, True
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size"
            and not expr.args and not expr.keywords):
        return expr.func.value, True, True
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        inner = shape_of(expr.value)
        if inner is None or expr.slice.step is not None:
            return None
        lower = integer(expr.slice.lower, {}) if expr.slice.lower is not None else 0
        return inner[0], inner[1] and lower == 0, inner[2] and expr.slice.upper is None
    return None

def dimension(index: int | None, why: Why) -> Verdict:
    if index == 0:
        return Verdict(RUNTIME, why)
    if index == -1:
        return Verdict(MODEL, why)
    return Verdict(UNKNOWN)

def is_weight(tensor: ast.expr | None) -> bool:
    """Whether a tensor's name says the built model or the server fixes its sizes: a weight, a bias or a scale, or a
    pool (`state_pool`, `kv_pool`: slots allocated at start-up that requests index into)."""
    name = py.dotted(tensor) if tensor is not None else None
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_WEIGHT.match(last)) or bool(_POOL.search(last))

def integer(node: ast.expr | None, constants: dict[str, ast.expr], depth: int = 0) -> int | None:
    """An integer literal, a module constant holding one, or a product or power of those."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = integer(node.operand, constants, depth + 1)
        return None if inner is None else -inner
    if isinstance(node, ast.Name) and node.id in constants:
        return integer(constants[node.id], constants, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow, ast.LShift)):
        left, right = integer(node.left, constants, depth + 1), integer(node.right, constants, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mult):
            return left * right
        if 0 <= right <= 64:
            return left ** right if isinstance(node.op, ast.Pow) else left << right
    return None

def constant_index(index: ast.expr) -> bool:
    """Whether an index takes one value whatever the batch: an integer, a slice with constant bounds, `...`, `None`,
    or a tuple of those (`pool[0]`, `cache[:, 0]`)."""
    if isinstance(index, ast.Tuple):
        return all(constant_index(item) for item in index.elts)
    if isinstance(index, ast.Slice):
        return all(part is None or integer(part, {}) is not None for part in (index.lower, index.upper, index.step))
    if isinstance(index, ast.Constant):
        return index.value is None or index.value is Ellipsis or isinstance(index.value, int)
    return integer(index, {}) is not None

def written(node: ast.AST) -> str:
    """A short rendering of an expression for a message."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - an expression ast cannot render
        return ""
    return text if len(text) <= 40 else text[:37] + "..."
