"""Shell scripts and Makefiles.

Shell: `#` at the start of a word, outside quotes (`'..'`, `".."`, `$'..'`), here-documents (whose delimiter
may be quoted in parts: `<<E"O"F` ends at `EOF`), parameter expansions (`${x:- # not a comment}`) and
arithmetic (`$(( 16#ff ))`, `(( a << 2 ))`). A substitution is part of the word it stands in: `$(cmd)#x` and
`$((1))#x` are one word, and a comment inside backquotes ends at the closing backquote.

Makefiles: `#` not escaped, outside `define` blocks (`override define` and `export define` too, nested ones
counted, an `endef` that a comment follows included) and outside variable references and function calls
(`$(info # text)`, where make reads `#` literally). A recipe (a line that starts with a tab, or what follows the
`;` of `target: ; command`) is read as shell, as one command through the lines its backslashes continue, once make
has expanded its references (a `$(info # text)` there is make's, `$$` the shell's `$`).
"""

from __future__ import annotations

import re

from kgate.support.comments.span import Comment, backslashes_before, line_end

_WORD_BREAK = " \t\n;&|()<>"
# `<<` or `<<-`, then the delimiter word: plain characters, quoted parts and escaped characters.
_HEREDOC = re.compile(r"""<<(-?)[ \t]*((?:'[^'\n]*'|"[^"\n]*"|\\.|[^\s;&|()<>'"\\])+)""")
_UNQUOTE = re.compile(r"""'([^']*)'|"([^"]*)"|\\(.)""")


def shell_comments(text: str) -> list[Comment]:
    out: list[Comment] = []
    _scan(text, 0, out, closing=False)
    return out


def _scan(text: str, index: int, out: list[Comment], *, closing: bool) -> int:
    """Read shell code from `index`, adding its comments to `out`; where `closing` (the body of a command
    substitution inside a double-quoted string), up to and past the `)` that closes it. Where it stops."""
    pending: list[tuple[str, bool]] = []  # here-documents whose bodies start on the next line
    opened: list[bool] = []  # the open parentheses: True for a command substitution's `$(`
    glued: set[int] = set()  # offsets of a `)` that closes a substitution: the word goes on after it
    length = len(text)
    while index < length:
        ch = text[index]
        if ch == "\\":
            index += 2
        elif ch == "'":
            index = _until(text, index + 1, "'", escapes=index > 0 and text[index - 1] == "$")
        elif ch == '"':
            index = _double_quoted(text, index + 1, out)
        elif ch == "`":
            index = _backquoted(text, index, out)
        elif ch == "#" and _starts_word(text, index, glued):
            end = line_end(text, index)
            out.append(Comment(index, end, False))
            index = end
        elif text.startswith("${", index):
            index = _parameter_end(text, index + 2, out)
        elif text.startswith("$((", index) or text.startswith("((", index) and _starts_word(text, index, glued):
            close = text.find("))", index + 2)  # arithmetic: `<<` there is a shift, `#` a base
            if ch == "$":
                glued.add(close + 1)
            index = length if close < 0 else close + 2
        elif ch == "(" or text.startswith("$(", index):
            opened.append(ch == "$")
            index += 2 if ch == "$" else 1
        elif ch == ")":
            if closing and not opened:
                return index + 1
            if opened and opened.pop():
                glued.add(index)
            index += 1
        elif ch == "<" and text.startswith("<<", index) and not text.startswith("<<<", index):
            heredoc = _HEREDOC.match(text, index)
            if heredoc is None:
                index += 2
                continue
            pending.append((_UNQUOTE.sub(lambda m: next(g for g in m.groups() if g is not None), heredoc.group(2)),
                            bool(heredoc.group(1))))
            index = heredoc.end()
        elif ch == "\n" and pending:
            index = _heredoc_bodies(text, index + 1, pending)
            pending = []
        else:
            index += 1
    return length


def _double_quoted(text: str, index: int, out: list[Comment]) -> int:
    """Past the `"` that closes a double-quoted string whose text starts at `index`. The substitutions and expansions
    in it are read as the shell reads them, with quotes of their own (`"$(echo " # x")"` is one string)."""
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
        elif ch == '"':
            return index + 1
        elif text.startswith("$((", index):
            close = text.find("))", index + 3)
            index = len(text) if close < 0 else close + 2
        elif text.startswith("$(", index):
            index = _scan(text, index + 2, out, closing=True)
        elif text.startswith("${", index):
            index = _parameter_end(text, index + 2, out)
        elif ch == "`":
            index = _backquoted(text, index, out)
        else:
            index += 1
    return len(text)


def _starts_word(text: str, index: int, glued: set[int]) -> bool:
    """Whether `text[index]` starts a shell word: a backslash-newline before it joins the lines, so the character
    before the backslash decides (`a\\<newline>#b` is the word `a#b`); an escaped blank or operator is a character
    of the word (`a\\ #b` is the word `a #b`); a `)` that closes a substitution does not end the word it stands in."""
    while index >= 2 and text[index - 1] == "\n" and text[index - 2] == "\\":
        if backslashes_before(text, index - 1) % 2 == 0:
            break  # `\\` is an escaped backslash: the newline is a newline
        index -= 2
    return index == 0 or text[index - 1] in _WORD_BREAK and index - 1 not in glued \
        and backslashes_before(text, index - 1) % 2 == 0


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


def _parameter_end(text: str, index: int, out: list[Comment]) -> int:
    """Past the `}` that closes a parameter expansion whose text starts at `index`: quotes, substitutions and
    nested expansions inside it are skipped, and a `#` there is text (`${x#prefix}`, `${x:- # word}`)."""
    depth = 1
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
        elif ch == "'":
            index = _until(text, index + 1, ch, escapes=False)
        elif ch == '"':
            index = _double_quoted(text, index + 1, out)
        elif text.startswith("$(", index) and not text.startswith("$((", index):
            index = _scan(text, index + 2, out, closing=True)
        elif text.startswith("${", index):
            depth += 1
            index += 2
        elif ch == "}":
            depth -= 1
            index += 1
            if depth == 0:
                return index
        else:
            index += 1
    return len(text)


def _backquoted(text: str, index: int, out: list[Comment]) -> int:
    """Past a backquoted command substitution starting at `index`; its comments (read as shell, each ending at the
    closing backquote at the latest) are added to `out`."""
    close = index + 1
    while close < len(text) and text[close] != "`":
        close += 2 if text[close] == "\\" else 1
    inner = text[index + 1:close]
    out.extend(Comment(index + 1 + c.start, index + 1 + c.end, False) for c in shell_comments(inner))
    return min(close + 1, len(text))


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

_DEFINE_PREFIXES = ("override", "export", "private")


def make_comments(text: str) -> list[Comment]:
    return _make_read(text)[0]


def make_recipe_lines(text: str) -> set[int]:
    """The lines (numbered from 0) of a Makefile that hold recipe text, which make hands to the shell: the spacing
    before a comment there is the shell's, as nothing. Everywhere else the spacing before a comment is make text,
    part of what the line says (`X := a  # note` gives `X` the value `a` and two spaces)."""
    return _make_read(text)[1]


def _make_read(text: str) -> tuple[list[Comment], set[int]]:
    """A Makefile's comments, and the lines that hold recipe text."""
    recipes: set[int] = set()
    out: list[Comment] = []
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    define = 0  # how deep in `define` blocks the line is
    continued = ""  # what the previous line, ended by a backslash, continues: "comment", "code" or ""
    closers = ""  # the variable references and function calls open at the end of the previous line
    number = 0
    while number < len(lines):
        line, offset = lines[number], starts[number]
        body = line.rstrip("\r")
        recipe = _recipe_start(body) if not (continued or define) else None
        if continued == "comment":  # a comment ended by a backslash goes on through this line
            out[-1] = Comment(out[-1].start, offset + len(body), False)
        elif continued:  # a variable's value going on: a `#` there starts a comment too
            closers = _make_hash(line, offset, out, closers)
        elif define:
            define = _define_depth(body, define)
        elif _opens_define(body):
            define = 1
        elif recipe is not None:  # a recipe, through the lines its backslashes continue, is one shell command
            if recipe:  # `target: prerequisites ; recipe`: the rule's part is make text
                closers = _make_hash(line[:recipe], offset, out, "")
            last = _recipe_comments(text, lines, starts, number, offset + recipe, out)
            recipes.update(range(number, last + 1))
            number = last + 1
            continued = ""
            continue
        else:
            closers = _make_hash(line, offset, out, "")
        ends_comment = bool(out) and out[-1].end == offset + len(body)
        continued = ("comment" if ends_comment else "code") if body.endswith("\\") else ""
        number += 1
    return out, recipes


def _recipe_comments(text: str, lines: list[str], starts: list[int], number: int, begin: int,
                     out: list[Comment]) -> int:
    """Add the comments of the recipe that starts at offset `begin` of line `number` to `out`: one shell command
    through the lines its backslashes continue, as make hands it to the shell. The number of its last line."""
    last = number
    while last + 1 < len(lines) and _continued(lines[last].rstrip("\r")):
        last += 1
    command = _without_references(text[begin:starts[last] + len(lines[last])])
    out.extend(Comment(begin + c.start, begin + c.end, False) for c in shell_comments(command))
    return last


def _continued(body: str) -> bool:
    """Whether a line ends in a backslash that no other escapes: the next line goes on with it."""
    return backslashes_before(body, len(body)) % 2 == 1


def _recipe_start(body: str) -> int | None:
    """Where a line's recipe starts: 0 for a recipe line (a tab first), past the `;` of a rule that has its recipe
    on the rule's own line (`all: ; nvcc ...`), None for a line that holds none."""
    if body.startswith("\t"):
        return 0
    if body.lstrip().split(" ", 1)[0] in _DIRECTIVES:
        return None
    masked = _without_references(body)
    colon = masked.find(":")
    equals = masked.find("=")
    if colon < 0 or 0 <= equals <= colon or masked.startswith("=", colon + 1) or masked.startswith(":=", colon + 1):
        return None
    semicolon, comment = masked.find(";", colon), masked.find("#", colon)
    if semicolon < 0 or 0 <= comment < semicolon or 0 <= masked.find("=", colon) < semicolon:
        return None
    return semicolon + 1


_DIRECTIVES = frozenset(("ifeq", "ifneq", "ifdef", "ifndef", "else", "endif", "include", "-include", "sinclude",
                         "export", "unexport", "override", "private", "vpath", "define", "endef", "undefine"))


def _without_references(text: str) -> str:
    """Make text with what make expands before a shell sees it blanked (offsets kept, newlines too): variable
    references and function calls (`$(info # text)` prints its `#`), and the first `$` of `$$`, which the shell
    gets as one `$`."""
    chars = list(text)
    index = 0
    while index < len(text) - 1:
        if text[index] != "$":
            index += 1
            continue
        follow = text[index + 1]
        end = index + 2
        if follow == "$":
            chars[index] = "_"
        elif follow in "({":
            close, depth = (")", 1) if follow == "(" else ("}", 1)
            while end < len(text) and depth:
                depth += {follow: 1, close: -1}.get(text[end], 0)
                end += 1
            chars[index:end] = [c if c == "\n" else "_" for c in text[index:end]]
        elif not follow.isspace():
            chars[index:end] = "__"
        index = end
    return "".join(chars)


def _make_hash(line: str, offset: int, out: list[Comment], closers: str) -> str:
    """Add the comment of one line of make text to `out`: the first `#` that no backslash escapes and no variable
    reference or function call holds (`closers`: those still open from the line before). The references still
    open at the line's end."""
    body = line.rstrip("\r")
    for match in _MAKE_TOKEN.finditer(body):
        token, at = match.group(), match.start()
        if token == "$$":
            continue
        if token in ("$(", "${"):
            closers += ")" if token == "$(" else "}"
        elif closers and token == _OPENER[closers[-1]]:
            closers += closers[-1]  # parentheses of the same kind nest inside a reference
        elif closers and token == closers[-1]:
            closers = closers[:-1]
        elif token == "#" and not closers and backslashes_before(body, at) % 2 == 0:
            out.append(Comment(offset + at, offset + len(body), False))
            return ""
    return closers


_MAKE_TOKEN = re.compile(r"\$\$|\$[({]|[#(){}]")
_OPENER = {")": "(", "}": "{"}


def _opens_define(body: str) -> bool:
    words = body.split()
    while words and words[0] in _DEFINE_PREFIXES:
        words = words[1:]
    return bool(words) and words[0] == "define" and not body.startswith("\t")


def _define_depth(body: str, depth: int) -> int:
    """The `define` depth after one line of a define's body, as make counts it: a line that starts with a tab is
    text; `define` opens a nested block and `endef` (alone, or before spaces and a comment) closes one."""
    if body.startswith("\t"):
        return depth
    word = body.lstrip(" \t")
    if word.startswith("define") and word[6:7] in ("", " ", "\t"):
        return depth + 1
    if word.startswith("endef") and word[5:6] in ("", " ", "\t"):
        return depth - 1
    return depth
