"""Did-you-mean: the nearest of a set of known words to a mistyped one (commands, flags, rule codes and names)."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word most like `word` (difflib's ratio, at least 0.6), or None when nothing is close.

    Codes are compared without case (`kg13` finds KG103, `--Selct` finds --select)."""
    import difflib  # only on the way to an error message

    by_fold = {}
    for candidate in known:
        by_fold.setdefault(candidate.casefold(), candidate)
    found = difflib.get_close_matches(word.casefold(), list(by_fold), n=1, cutoff=0.6)
    return by_fold[found[0]] if found else None


def hint(word: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest known word, or '' when nothing is close."""
    found = closest(word, known)
    return f" (did you mean {found!r}?)" if found else ""
