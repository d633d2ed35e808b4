"""Where a file's comments are, for every kind of file kgate reads directives from or edits.

One reader per language, used by the suppression parser, by KG002's fix and by `--add-ignore`: a
`kgate: ignore` is a directive only inside a comment, and an edit that is meant to touch comments only
must leave the rest of the file (`code_only`) as it was.

- Python: the tokenizer (a file it cannot read: a scan that knows the string forms).
- C, C++, CUDA: `blank` (raw strings, character literals, continued `//` comments), which C++ rules read
  through `kgate.collect.cpp_text`.
- CMake: `#` and bracket comments `#[==[ ]==]`; quoted and bracket arguments are not comments.
- Shell: `#` at the start of a word, outside quotes (`'..'`, `".."`, `$'..'`) and here-documents.
- Makefiles: `#` not escaped, outside `define` blocks; a recipe line is read as shell.
- TOML: `#` outside the four kinds of string.
- INI (`setup.cfg`, `tox.ini`, `pytest.ini`): lines that start with `#` or `;` (inline text is a value).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import NamedTuple


class Comment(NamedTuple):
    start: int  # offset of the comment's marker
    end: int  # offset just past the comment (a line comment ends before its newline)
    block: bool  # `/* */` or CMake's `#[[ ]]`: no place for a directive


_HASH_NAMES = {"CMakeLists.txt": "cmake", "Makefile": "make", "makefile": "make", "GNUmakefile": "make",
               "setup.cfg": "ini", "tox.ini": "ini", "pytest.ini": "ini"}
_SUFFIXES = {".py": "python", ".pyi": "python", ".cmake": "cmake", ".mk": "make", ".sh": "shell", ".bash": "shell",
             ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".json": "json"}
CPP_SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc")
# The marker `--add-ignore` writes a line comment with, by language (INI and JSON take none at a line's end).
LINE_MARKER = {"python": "#", "cpp": "//", "cmake": "#", "shell": "#", "make": "#", "toml": "#"}


def language(rel: str) -> str | None:
    """The language of a file by its name, or None where kgate knows no comments in it."""
    name = rel.rsplit("/", 1)[-1]
    if name in _HASH_NAMES:
        return _HASH_NAMES[name]
    if name.endswith(CPP_SUFFIXES):
        return "cpp"
    dot = name.rfind(".")
    return _SUFFIXES.get(name[dot:]) if dot > 0 else None


def comments(text: str, lang: str | None) -> list[Comment]:
    """The comments of `text` in order (none for a language kgate knows no comments of)."""
    reader = _READERS.get(lang or "")
    return reader(text) if reader is not None else []


def code_only(text: str, lang: str | None) -> str:
    """`text` without its comments: each comment and the spacing before it go (a space stays where code
    follows on the line), a line that held only comments goes, and no line keeps trailing spaces. Two texts
    with the same `code_only` differ in comments alone, or in the spaces at the end of a line (which kgate's
    comment edits never change inside a string: an edit there also changes the string's other text)."""
    pieces: list[str] = []
    done = 0
    found = comments(text, lang)
    for comment in found:
        start = comment.start
        while start > done and text[start - 1] in " \t":
            start -= 1
        pieces.append(text[done:start])
        newline = text.find("\n", comment.end)
        following = text[comment.end:len(text) if newline < 0 else newline]
        pieces.append("\n" * text.count("\n", comment.start, comment.end) + (" " if following.strip() else ""))
        done = comment.end
    pieces.append(text[done:])
    held: set[int] = set()
    for comment in found:
        first = text.count("\n", 0, comment.start)
        held.update(range(first, first + text.count("\n", comment.start, comment.end) + 1))
    return "\n".join(line.rstrip(" \t\r") for number, line in enumerate("".join(pieces).split("\n"))
                     if not (number in held and not line.strip(" \t\r")))


def same_code(rel: str, before: str, after: str) -> bool:
    """Whether `after` differs from `before` in comments only, as the language of `rel` reads them."""
    lang = language(rel)
    if lang == "python":
        import ast

        try:
            return ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
        except (SyntaxError, ValueError):
            return False
    if lang == "toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return tomllib.loads(before) == tomllib.loads(after)
        except ValueError:
            return False
    if lang == "json":
        return before == after
    return code_only(before, lang) == code_only(after, lang)


# --------------------------------------------------------------------------- Python


def _python(text: str) -> list[Comment]:
    import tokenize

    # Python ends a line at `\r\n`, `\r` or `\n` (a lone `\r` too, as `ast` counts lines): the tokenizer is given
    # the lines so split, so that its rows are the rows of `starts`.
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
    lines = iter(PY_LINE.findall(text))
    out = []
    try:
        for token in tokenize.generate_tokens(lambda: next(lines, "")):
            if token.type == tokenize.COMMENT:
                at = starts[token.start[0] - 1] + token.start[1]
                out.append(Comment(at, at + len(token.string), False))
    except (tokenize.TokenError, SyntaxError):
        return _scan_hash(text, _PY_STRING)
    return out


PY_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
PY_NEWLINE = re.compile(r"\r\n|\r|\n")
# A Python string with its prefix; (opening, closing, escapes) is decided from the match.
_PY_STRING = re.compile(r"""(?i:[rbuf]{0,2})('''|\"\"\"|'|")""")
_TOML_STRING = re.compile(r"""('''|\"\"\"|'|")""")


def _scan_hash(text: str, string: re.Pattern[str]) -> list[Comment]:
    """`#` comments outside strings, for Python (when it does not tokenize) and TOML: single- and
    triple-quoted strings, with backslash escapes except in raw (Python) or literal `'` (TOML) strings."""
    out: list[Comment] = []
    index = 0
    toml = string is _TOML_STRING
    while True:
        match = re.compile(r"#|" + string.pattern).search(text, index)
        if match is None:
            return out
        if match.group() == "#":
            end = _line_end(text, match.start())
            out.append(Comment(match.start(), end, False))
            index = end
            continue
        quote = match.group(1)
        prefix = match.group()[:-len(quote)].lower()
        if not toml and match.start() > 0 and (text[match.start() - 1].isalnum() or text[match.start() - 1] == "_"):
            index = match.end() if not prefix else match.start() + 1
            continue
        escapes = "r" not in prefix and not (toml and quote[0] == "'")
        index = _string_end(text, match.end(), quote, escapes)


def _string_end(text: str, index: int, quote: str, escapes: bool) -> int:
    while index < len(text):
        ch = text[index]
        if escapes and ch == "\\":
            index += 2
            continue
        if text.startswith(quote, index):
            return index + len(quote)
        if ch == "\n" and len(quote) == 1:
            return index + 1
        index += 1
    return len(text)


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    end = len(text) if end < 0 else end
    return end - 1 if end > index and text[end - 1] == "\r" else end


def _toml(text: str) -> list[Comment]:
    return _scan_hash(text, _TOML_STRING)


# --------------------------------------------------------------------------- C, C++, CUDA
#
# Source rules and launch-site analysis search C++ text with regular expressions; a launch inside a comment
# or a string is not a launch. Blanking (every character of a comment or of a literal's contents becomes a
# space, newlines stay) keeps every match's offset and line number valid in the original text.

_RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')


@dataclass(frozen=True)
class Blanked:
    code: str  # the text with comments and literal contents replaced by spaces
    comment_lines: frozenset[int]  # 1-based lines that hold part of a comment
    comments: tuple[tuple[int, int], ...] = ()  # (start, end) offsets of each comment, markers included


def blank(text: str) -> Blanked:
    """The text with comments and literal contents blanked, and the lines that hold comments.

    The scan jumps from one place where a comment or a literal may start to the next (a regular
    expression finds them), so plain code costs nothing per character: a generated 50 MB file takes
    seconds, not minutes.
    """
    pieces: list[str] = []
    comment_lines: set[int] = set()
    spans: list[tuple[int, int]] = []
    done = 0  # text[:done] is in `pieces`
    line = 1  # the line of `index`
    counted = 0  # newlines are counted up to here
    index = 0
    length = len(text)
    while True:
        match = _START.search(text, index)
        if match is None:
            break
        at = match.start()
        line += text.count("\n", counted, at)
        counted = at
        ch = text[at]
        if ch == "/":
            end = _line_comment_end(text, at) if text[at + 1] == "/" else _block_comment_end(text, at)
            comment_lines.update(range(line, line + text.count("\n", at, end) + 1))
            spans.append((at, end - 1 if text[at + 1] == "/" and text[end - 1:end] == "\r" else end))
            wipe_from, wipe_to = at, end
        elif ch in "\"'":
            if ch == "'" and at > 0 and text[at - 1].isalnum() and _digit_separator(text, at):
                index = at + 1  # 1'000'000
                continue
            end = _literal_end(text, at, ch)
            wipe_from, wipe_to = at + 1, max(at + 1, end - 1)
        else:  # `R"`: a raw string with its prefix (u8, u, U, L), unless that ends an identifier (`fooR"...`)
            if at - 2 >= index and text.startswith("u8", at - 2):
                at -= 2
            elif at - 1 >= index and text[at - 1] in "uUL":
                at -= 1
            raw = _RAW_OPEN.match(text, at)
            if raw is None or at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
                index = match.end() - 1  # the quote: a plain literal
                continue
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = length if close < 0 else close + len(raw.group(1)) + 2
            wipe_from, wipe_to = raw.end(), max(raw.end(), end - len(raw.group(1)) - 2)
        pieces.append(text[done:wipe_from])
        pieces.append(_NOT_NEWLINE.sub(" ", text[wipe_from:wipe_to]))
        done = wipe_to
        index = end
    pieces.append(text[done:])
    return Blanked("".join(pieces), frozenset(comment_lines), tuple(spans))


# Where a comment or a literal may start; each alternative starts with a fixed character, which lets the
# regex engine skip plain code quickly. A raw string is found by its `R"` and confirmed by _RAW_OPEN.
_START = re.compile(r"""/[/*]|["']|R\"""")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _block_comment_end(text: str, start: int) -> int:
    end = text.find("*/", start + 2)
    return len(text) if end < 0 else end + 2


def _line_comment_end(text: str, start: int) -> int:
    """End of a `//` comment: the newline, unless the line ends in a backslash (continued)."""
    index = start
    while True:
        end = text.find("\n", index)
        if end < 0:
            return len(text)
        if text[end - 1] == "\\" or (text[end - 1] == "\r" and text[end - 2] == "\\"):
            index = end + 1
            continue
        return end


def _literal_end(text: str, start: int, quote: str) -> int:
    index = start + 1
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == quote or ch == "\n":
            return index + 1
        index += 1
    return len(text)


def _digit_separator(text: str, index: int) -> bool:
    before = text[index - 1]
    after = text[index + 1] if index + 1 < len(text) else ""
    return before.isalnum() and after.isalnum() and _in_number(text, index)


def _in_number(text: str, index: int) -> bool:
    start = index
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "'._"):
        start -= 1
    return text[start].isdigit()




def _cpp(text: str) -> list[Comment]:
    return [Comment(start, end, text.startswith("/*", start)) for start, end in blank(text).comments]


# --------------------------------------------------------------------------- CMake

_CMAKE = re.compile(r'#\[(=*)\[|#|"|\[(=*)\[|\\')


def _cmake(text: str) -> list[Comment]:
    out: list[Comment] = []
    index = 0
    while True:
        match = _CMAKE.search(text, index)
        if match is None:
            return out
        at, token = match.start(), match.group()
        if token == "\\":
            index = at + 2
        elif token.startswith("#["):
            close = text.find("]" + match.group(1) + "]", match.end())
            end = len(text) if close < 0 else close + len(match.group(1)) + 2
            out.append(Comment(at, end, True))
            index = end
        elif token == "#":
            end = _line_end(text, at)
            out.append(Comment(at, end, False))
            index = end
        elif token == '"':
            index = _cmake_quoted_end(text, at + 1)
        else:  # `[=[`: a bracket argument where an argument starts
            if at > 0 and text[at - 1] not in " \t\r\n()":
                index = at + 1
                continue
            close = text.find("]" + match.group(2) + "]", match.end())
            index = len(text) if close < 0 else close + len(match.group(2)) + 2


def _cmake_quoted_end(text: str, index: int) -> int:
    """End of a CMake quoted argument, which may span lines."""
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == '"':
            return index + 1
        index += 1
    return len(text)


# --------------------------------------------------------------------------- shell

_WORD_BREAK = " \t\n;&|()<>"
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([A-Za-z0-9_.-]+))")


def _shell(text: str) -> list[Comment]:
    out: list[Comment] = []
    pending: list[tuple[str, bool]] = []  # here-documents whose bodies start on the next line
    index = 0
    length = len(text)
    while index < length:
        ch = text[index]
        if ch == "\\":
            index += 2
        elif ch == "'":
            index = _until(text, index + 1, "'", escapes=index > 0 and text[index - 1] == "$")
        elif ch == '"':
            index = _until(text, index + 1, '"', escapes=True)
        elif ch == "#" and _starts_word(text, index):
            end = _line_end(text, index)
            out.append(Comment(index, end, False))
            index = end
        elif ch == "$" and text.startswith("$((", index):  # arithmetic: `<<` there is a shift
            close = text.find("))", index + 3)
            index = length if close < 0 else close + 2
        elif ch == "<" and text.startswith("<<", index) and not text.startswith("<<<", index):
            heredoc = _HEREDOC.match(text, index)
            if heredoc is None:
                index += 2
                continue
            word = heredoc.group(2) if heredoc.group(2) is not None else heredoc.group(3) \
                if heredoc.group(3) is not None else heredoc.group(4)
            pending.append((word, bool(heredoc.group(1))))
            index = heredoc.end()
        elif ch == "\n" and pending:
            index = _heredoc_bodies(text, index + 1, pending)
            pending = []
        else:
            index += 1
    return out


def _starts_word(text: str, index: int) -> bool:
    """Whether `text[index]` starts a shell word: a backslash-newline before it joins the lines, so the character
    before the backslash decides (`a\\<newline>#b` is the word `a#b`)."""
    while index >= 2 and text[index - 1] == "\n" and text[index - 2] == "\\":
        run = len(text[:index - 1]) - len(text[:index - 1].rstrip("\\"))
        if run % 2 == 0:
            break  # `\\` is an escaped backslash: the newline is a newline
        index -= 2
    return index == 0 or text[index - 1] in _WORD_BREAK


def _until(text: str, index: int, quote: str, *, escapes: bool) -> int:
    while index < len(text):
        ch = text[index]
        if escapes and ch == "\\":
            index += 2
            continue
        if ch == quote:
            return index + 1
        index += 1
    return len(text)


def _heredoc_bodies(text: str, index: int, pending: list[tuple[str, bool]]) -> int:
    """Past the bodies of the here-documents opened on the line before `index`."""
    for word, tabs in pending:
        while index < len(text):
            end = text.find("\n", index)
            end = len(text) if end < 0 else end
            line = text[index:end].rstrip("\r")
            index = end + 1
            if (line.lstrip("\t") if tabs else line) == word:
                break
    return min(index, len(text))


# --------------------------------------------------------------------------- Makefiles


def _make(text: str) -> list[Comment]:
    out: list[Comment] = []
    offset = 0
    in_define = False
    continued = ""  # what the previous line, ended by a backslash, continues: "comment", "code" or ""
    for line in text.split("\n"):
        stripped = line.strip()
        body = line.rstrip("\r")
        if continued == "comment":  # a comment ended by a backslash goes on through this line
            out[-1] = Comment(out[-1].start, offset + len(body), False)
        elif continued:  # a variable's value or a recipe going on: a `#` there starts a comment too
            at = _unescaped_hash(line)
            if at >= 0:
                out.append(Comment(offset + at, offset + len(body), False))
        elif in_define:
            in_define = stripped != "endef"
        elif stripped.startswith("define ") or stripped == "define":
            in_define = True
        elif line.startswith("\t"):
            out.extend(Comment(offset + c.start, offset + c.end, False) for c in _shell(line))
        else:
            at = _unescaped_hash(line)
            if at >= 0:
                out.append(Comment(offset + at, offset + len(body), False))
        ends_comment = bool(out) and out[-1].end == offset + len(body)
        continued = ("comment" if ends_comment else "code") if body.endswith("\\") else ""
        offset += len(line) + 1
    return out


def _unescaped_hash(line: str) -> int:
    for match in re.finditer("#", line):
        slashes = len(line[:match.start()]) - len(line[:match.start()].rstrip("\\"))
        if slashes % 2 == 0:
            return match.start()
    return -1


# --------------------------------------------------------------------------- INI


def _ini(text: str) -> list[Comment]:
    out = []
    for match in re.finditer(r"(?m)^[ \t]*([#;][^\r\n]*)", text):
        out.append(Comment(match.start(1), match.end(1), False))
    return out


_READERS = {"python": _python, "cpp": _cpp, "cmake": _cmake, "shell": _shell, "make": _make, "toml": _toml,
            "ini": _ini}
