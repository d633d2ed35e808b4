"""Did-you-mean: the nearest of a set of known words to a mistyped one (commands, flags, rule codes and names)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word most like `word` (difflib's ratio, at least 0.6), or None when nothing is close.

    Codes are compared without case (`kg13` finds KG103, `--Selct` finds --select)."""
    import difflib  # only on the way to an error message

    by_fold: dict[str, str] = {}
    for candidate in known:
        by_fold.setdefault(candidate.casefold(), candidate)
    folded = word.casefold()
    found = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=0.6)
    if found and _CODE.match(folded) and not _one_edit(folded, found[0]):
        return None  # a code is a number: KG999 is not a typo of KG109, KG1O3 or kg13 are of KG103
    return by_fold[found[0]] if found else None


_CODE = re.compile(r"kg\w*$")


def _one_edit(a: str, b: str) -> bool:
    """Whether one character changed, added, removed, or two neighbours swapped turn `a` into `b`."""
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = sorted((a, b), key=len)
    if len(long_) - len(short) != 1:
        return False
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def hint(word: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest known word, or '' when nothing is close."""
    found = closest(word, known)
    return f" (did you mean {found!r}?)" if found else ""
