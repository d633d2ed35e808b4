"""A statement of blanked C++ text (`kgate.collect.cpp_text.blank`) read around one offset: what a `{` opens (a
function, a lambda, a block), where a call's statement ends, whether a statement is a call, a braceless body or under
a condition. `kgate.collect.cpp_flow` follows control between such statements.
"""

from __future__ import annotations

import re

from kgate.collect.cpp_text import balanced

_SPECIFIERS = re.compile(r"(?:\b(?:const|noexcept|override|final|mutable|constexpr|consteval|static|__host__|__device__)"
                         r"|->[^{};()]*)\s*$")
_NAME_BEFORE = re.compile(r"(?:~\s*)?[A-Za-z_][\w:]*$")
_ATTRIBUTE_BEFORE = re.compile(r"\b(?:__host__|__device__|mutable)$")
CONTROL = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "constexpr", "consteval",
                      "requires"})
NAMESPACE_HEAD = re.compile(r"\bnamespace\s*(?:\w[\w:]*\s*)?$|\bextern\s*\"\s*\"\s*$")
SCOPE_HEAD = re.compile(r"\b(?:namespace|class|struct|union|enum)\b[^;{}()]*$|\bextern\s*\"\s*\"\s*$")


def head(code: str, opening: int) -> tuple[str, int, str]:
    """What the `{` at `opening` opens: ("lambda", offset of its `[`, ""), ("function", offset of its name,
    name), or ("block", -1, "") for anything else (a control statement, a class, an initializer)."""
    end = opening
    while True:  # specifiers and a trailing return type
        found = _SPECIFIERS.search(code, max(0, end - 120), end)
        if found is None or found.start() == end:
            break
        end = found.start()
    close = previous(code, end)
    if close < 0 or code[close] not in ")]":
        return "block", -1, ""
    if code[close] == ")":
        paren = opening_bracket(code, close, "(", ")")
        if paren < 0:
            return "block", -1, ""
        close = previous(code, paren)
        while close >= 0:  # a device lambda: `[=] __device__ (int i) {`
            word = _ATTRIBUTE_BEFORE.search(code, max(0, close - 20), close + 1)
            if word is None:
                break
            close = previous(code, word.start())
        if close >= 0 and (code[close].isalnum() or code[close] == "_"):
            name = _NAME_BEFORE.search(code, max(0, close - 200), close + 1)
            text = name.group().strip() if name is not None else ""
            return ("function", name.start(), text) if name is not None and text not in CONTROL else ("block", -1, "")
        if close >= 0 and code[close] == ">":  # a template lambda: `[&]<typename T>(T*) {`
            angle = opening_bracket(code, close, "<", ">")
            close = previous(code, angle) if angle >= 0 else -1
        if close < 0 or code[close] != "]":
            return "block", -1, ""
    bracket = opening_bracket(code, close, "[", "]")
    if bracket < 0 or not introduces_lambda(code[max(0, bracket - 20):bracket]):
        return "block", -1, ""
    return "lambda", bracket, ""


def previous(code: str, end: int) -> int:
    """Offset of the last character before `end` that is not white space, -1 if none."""
    index = end - 1
    while index >= 0 and code[index].isspace():
        index -= 1
    return index


def opening_bracket(code: str, close: int, opening: str, closing: str) -> int:
    """Offset of the bracket that opens the one at `close` (-1 if none, or too far back to be a head)."""
    depth = 0
    for index in range(close, max(-1, close - 4000), -1):
        ch = code[index]
        if ch == closing:
            depth += 1
        elif ch == opening:
            depth -= 1
            if depth == 0:
                return index
        elif ch == ";":
            return -1  # a brace inside the brackets is a default argument's (`DebugInfo where = {}`)
    return -1


def introduces_lambda(before: str) -> bool:
    """Whether a `[` after this text opens a lambda, not a subscript or an array declarator."""
    text = before.rstrip()
    return not text or text[-1] in "=(,{};:?" or bool(re.search(r"\breturn$", text))


_CONTINUATION = re.compile(r"\\[ \t]*\r?\n")
_DEFINE_HEAD = re.compile(r"\s*#\s*define\s+\w+(?:\([^)]*\))?")


def is_call(code: str, at: int) -> bool:
    """A name followed by `(` is a call unless a type comes before it (a declaration, an explicit instantiation
    `template void run<float>(...)`) or it is a member; in a macro's body, the lines its `\\` continues are one."""
    text = _CONTINUATION.sub(" ", code[max(0, at - 200):at]).rstrip()
    while text and text.rsplit("\n", 1)[-1].lstrip().startswith("#"):  # a preprocessor line ends a statement
        last = text.rsplit("\n", 1)[-1]
        head = _DEFINE_HEAD.match(last)
        if head is not None:  # what a macro's body holds before the name, read as a statement's start
            text = last[head.end():].rstrip()
            break
        text = text.rsplit("\n", 1)[0].rstrip() if "\n" in text else ""
    if not text:
        return True
    if text.endswith((".", "->")):
        return False
    word = re.search(r"(\w+)$", text)
    if word is not None:
        return word.group(1) in ("return", "else", "do", "case", "throw", "co_return", "co_await")
    return text[-1] not in "*&>"




def function_body(code: str, at: int) -> tuple[int, int]:
    """(start, end) of the outermost block around `at` that is not a namespace, class or `extern "C"`: the body
    of the function that holds it; (0, 0) at namespace scope."""
    found = (0, 0)
    opens: list[int] = []
    for match in re.finditer(r"[{}]", code[:at]):
        if match.group() == "{":
            opens.append(match.start())
        elif opens:
            opens.pop()
    for opening in opens:
        if not SCOPE_HEAD.search(code, max(0, opening - 200), opening):
            found = (opening, balanced(code, opening, "{", "}"))
            break
    return found


def statement_end(code: str, call: int) -> int:
    """Offset of the `;` that ends the statement of a call at `call` right after its arguments, -1 if none (a macro
    used without one, `case 1: PICK(x) break;`)."""
    paren = code.find("(", call)
    if paren < 0:
        return -1
    after = _skip_space(code, balanced(code, paren))
    return after if code.startswith(";", after) else -1


def _skip_space(code: str, at: int) -> int:
    """The first offset from `at` that is not white space (len(code) if none)."""
    while at < len(code) and code[at].isspace():
        at += 1
    return at



def braceless_body(code: str, at: int) -> bool:
    """Whether the statement at `at` is in the body of an if, else, loop or do written without braces: a statement
    put after it would fall out of that body (or part an `if` from its `else`). The statement is read from where the
    one before it ended, past the parentheses of a header (`if (int e = f(); e)`, `for (int i = 0; i < n; ++i)`), its
    attributes and its labels (`if (x) [[likely]] retry: k<<<...>>>()`)."""
    before = statement_before(code, at).strip()
    return _CONTROL.match(before) is not None


def conditional(code: str, at: int) -> bool:
    """Whether offset `at` lies in a statement that is the braceless body of an if, else or loop (`if (ok)
    check();`), so that it runs on some paths only; a control statement's condition (`if (cudaError_t e =
    cudaGetLastError(); e)`) runs on every path."""
    start = _statement_start(code, at)
    while start > 0 and code[start - 1] in "([":  # out of the parentheses and brackets that hold `at`
        start = _statement_start(code, start - 1)
    before = _LABELS.sub("", code[start:at]).lstrip()
    control = _CONTROL.match(before)
    if control is None:
        return False
    paren = _skip_space(code, start + (len(code[start:at]) - len(before)) + control.end())
    return not (code.startswith("(", paren) and balanced(code, paren) > at)


_CONTROL = re.compile(r"(?:if|else|for|while|do|switch)\b")
_LABELS = re.compile(r"^(?:\s*(?:case\b[^:;{}]*|default|[A-Za-z_]\w*)\s*:(?!:))+")


def _statement_start(code: str, at: int) -> int:
    """Where the statement holding `at` starts: past the last `;`, `{` or `}` before it outside parentheses and
    brackets (or past the parenthesis `at` stands in)."""
    depth = 0
    for index in range(at - 1, -1, -1):
        ch = code[index]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            depth -= 1
            if depth < 0:
                return index + 1
        elif depth == 0 and ch in ";{}":
            return index + 1
    return 0


def statement_before(code: str, at: int) -> str:
    """The text of the statement that `at` is in, from its start to `at`, without the labels before it (`case 1:`,
    `default:`, `done:`)."""
    return _LABELS.sub("", code[_statement_start(code, at):at])
