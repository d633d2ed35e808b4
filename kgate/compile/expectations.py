"""What a Triton variant is expected to contain, one answer for every kind of kernel.

A registration may say it (`expect = ["block_scale"]`, or `expect = []` where a fallback is intended). Where
none of a launch's registrations does, or the launch was captured, the expectation follows what this
specialisation compiles: block-scaled MMA where Triton's first IR of it (TTIR) holds a `tt.dot_scaled`. By then
the front end has put the specialisation's constexprs in, left out every branch they remove (`if USE_SCALED:
... tl.dot_scaled ... else: tl.dot`), and inlined the helpers the kernel calls however its source reaches them
(an import, an alias, a function passed as a constexpr); a `noinline` helper stays a function of the same
module. A plain, an autotuned, a heuristics and a wrapped kernel are all compiled through it, so none is
judged by its source text: a comment or a string that names `tl.dot_scaled` compiles to nothing. A Gluon kernel
has no TTIR: its first IR is Gluon's (`kgate.compile.gluon.first_ir`), read the same way.

A variant to compile carries what its registrations ask (`expect`) and whether the compile decides the rest
(`expect_implied`); the compile worker turns both into the expectation its facts hold (`compiled`).
"""

from __future__ import annotations

import re

from kgate.compile.payloads import Asked, Variant

BLOCK_SCALE = "block_scale"

# The op in MLIR's custom form (`%acc = tt.dot_scaled %a scale %sa, ...`) or its generic one (`"tt.dot_scaled"(`):
# never a function named so (`tt.call @tt.dot_scaled__...`) or a location's file name.
_DOT_SCALED = re.compile(r'(?:=\s*|")tt\.dot_scaled[\s"]')


def requested(expect: tuple[str, ...] | list[str] | None) -> Asked:
    """A registration's (or a capture's, None) request, as a variant to compile carries it."""
    return {"expect": sorted(expect or ()), "expect_implied": expect is None}


def merged(one: Asked, other: Asked) -> Asked:
    """What two requests of one launch ask together: each one's expectations."""
    return {"expect": sorted(set(one["expect"]) | set(other["expect"])),
            "expect_implied": bool(one.get("expect_implied")) or bool(other.get("expect_implied"))}


def calls_dot_scaled(ttir: str) -> bool:
    """Whether a specialisation's TTIR holds a `tt.dot_scaled` (in the kernel or a function it kept)."""
    return _DOT_SCALED.search(ttir) is not None


def compiled(variant: Variant, ttir: str) -> list[str]:
    """The expectations of a compiled variant: what its registrations ask, and block-scaled MMA where it is left to
    the compile and the TTIR calls for it."""
    found = set(variant.get("expect", ()))
    if variant.get("expect_implied") and calls_dot_scaled(ttir):
        found.add(BLOCK_SCALE)
    return sorted(found)
