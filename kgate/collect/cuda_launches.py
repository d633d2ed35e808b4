"""Where CUDA kernels are launched with programmatic dependent launch (PDL), and with how much dynamic shared
memory, read from the source.

A kernel is PDL-launched when a launch site passes it to `cudaLaunchKernelEx`
(or `cudaLaunchKernelExC`) in a function that sets the attribute
`cudaLaunchAttributeProgrammaticStreamSerialization` (and has not set
`programmaticStreamSerializationAllowed` to 0 by the time of the call), or passes it to one of the
project's own launch wrappers (`launch_wrappers = ["pdl::launch"]`). The
kernel argument is recognised by name: an identifier that some `__global__`
declaration of the project defines, with its template arguments if written.
Comments, string literals and the lines under `#if 0` are blanked first, so none of them counts.

A kernel's dynamic shared memory is what a `<<<grid, block, bytes>>>` launch, a
`cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)`,
the `dynamicSmemBytes` the function gives the configuration a `cudaLaunchKernelEx`
passes, or the `sharedMem` argument of a `cudaLaunchKernel` (or `cudaLaunchCooperativeKernel`) asks for, where the file settles `bytes` to a number
(`kgate.collect.cpp_constants`); a size only the run knows is no site.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kgate.collect.cpp_constants import Constants
from kgate.collect.cpp_statements import function_body
from kgate.collect.cpp_text import balanced, line_of, may_launch, shared_blank, split_arguments, without_disabled
from kgate.collect.cuda_names import base_name
from kgate.collect.smem_expressions import CompilerSize, CompilerSizes, given_by

_LAUNCH_EX = re.compile(r"\bcudaLaunchKernelExC?\s*(?:<[^;()]*>\s*)?\(")
# The runtime's launch with its arguments in an array: `cudaLaunchKernel(kernel, grid, block, args, bytes, stream)`,
# and the cooperative one, whose arguments are the same.
_LAUNCH_PLAIN = re.compile(r"\b(?P<via>cudaLaunch(?:Cooperative)?Kernel)\s*(?:<[^;()]*>\s*)?\(")
_PDL_ATTRIBUTE = "cudaLaunchAttributeProgrammaticStreamSerialization"
# The value the PDL attribute is given: one the file settles to 0 (`0`, `false`, `#define PDL 0`) turns it off; any
# other, a run-time flag included, may leave it on.
_PDL_VALUE = re.compile(r"programmaticStreamSerializationAllowed\s*=(?!=)\s*(?P<value>[^;,{}]+)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class LaunchSite:
    path: str
    line: int
    kernel: str  # the identifier of the kernel launched
    template: str | None  # its template arguments as written, without spaces ("<__half,128>"), if any
    via: str  # "cudaLaunchKernelEx" or the wrapper's name
    scope: str | None = None  # the namespaces or class written before it ("big" of `big::k`), if any


@dataclass(frozen=True)
class SmemSite:
    """Where a kernel is given dynamic shared memory: `bytes` of it (None: a size the source does not settle, one the
    run computes), by `via` ("<<<>>>", "cudaFuncSetAttribute", "cudaLaunchKernelEx", "cudaLaunchKernel" or
    "cudaLaunchCooperativeKernel")."""

    path: str
    line: int
    kernel: str
    template: str | None
    bytes: int | None
    via: str
    scope: str | None = None  # the namespaces or class written before the kernel ("big" of `big::k`), if any
    # A size the file does not settle and the compiler may (`sizeof(typename K::SharedStorage)`): `bytes` is 0
    # until a compile of the kernel's file evaluates it for one instantiation (`kgate.compile.cuda_probe`).
    compiler: CompilerSize | None = None


_SET_ATTRIBUTE = "cudaFuncSetAttribute"
_MAX_DYNAMIC = "MaxDynamicSharedMemorySize"
_DYNAMIC_BYTES = re.compile(r"\.?\bdynamicSmemBytes\s*=\s*([^;,{}]+)")


def smem_sites(text: str, path: str, kernels: set[str], headers: tuple[str, ...] = (),
               given: dict[str, str] | None = None, *, compiler: bool = False) -> list[SmemSite]:
    """The sites in one file's text that give a kernel of the project (`kernels`: their identifiers) a settled
    amount of dynamic shared memory; `headers`: the texts of the project headers the file includes, whose
    constants its sizes may name; `given`: the macros its compile's flags define (`-DSMEM=98304`). `compiler`:
    also those whose size the compiler may settle (`bytes` 0, and `compiler` says what to evaluate)."""
    return [site for site in every_smem_site(text, path, kernels, headers, given, compiler=compiler)
            if site.bytes is not None]


def every_smem_site(text: str, path: str, kernels: set[str], headers: tuple[str, ...] = (),
                    given: dict[str, str] | None = None, *, compiler: bool = False) -> list[SmemSite]:
    """`smem_sites`, and the sites that give a kernel a size the source does not settle (`bytes` None)."""
    if not may_launch(text) and _SET_ATTRIBUTE not in text and "cudaLaunch" not in text:
        return []
    code = without_disabled(shared_blank(text).code)  # a launch under `#if 0` is never compiled
    constants = Constants(lambda: [*(without_disabled(shared_blank(h).code) for h in headers), code], given)
    defined = namespaces(code, *headers)
    size = _Sizes(path, code, constants, compiler)
    sites: list[SmemSite] = []
    for match in re.finditer(r"<<<", code):
        close = code.find(">>>", match.end())
        if close < 0:
            continue
        config = split_arguments(_joined(code[match.end():close]))
        launched = _launched_kernels(code, match.start(), kernels, defined)
        if len(config) < 3 or not launched:
            continue
        sites += size.sites(config[2], match.start(), "<<<>>>", launched)
    for match in re.finditer(r"\b" + _SET_ATTRIBUTE + r"\s*(?:<[^;()]*>\s*)?\(", code):
        args = split_arguments(_joined(code[match.end():balanced(code, match.end() - 1) - 1]))
        if len(args) != 3 or _MAX_DYNAMIC not in args[1]:
            continue
        passed = _kernels_passed(args[0], code, match.start(), kernels, defined)
        sites += size.sites(args[2], match.start(), _SET_ATTRIBUTE, [(*named, None) for named in passed])
    for match in _LAUNCH_EX.finditer(code):
        open_paren = match.end() - 1
        args = split_arguments(_joined(code[open_paren + 1:balanced(code, open_paren) - 1]))
        passed = _kernels_passed(args[1], code, match.start(), kernels, defined) if len(args) >= 2 else []
        configured = _configured_bytes(code, args[0], match.start()) if passed else None
        if configured is not None:
            sites += size.sites(configured[0], match.start(), "cudaLaunchKernelEx", [(*named, None) for named in passed],
                                at=configured[1])
    for match in _LAUNCH_PLAIN.finditer(code):  # `cudaLaunchKernel(kernel, grid, block, args, bytes, stream)`
        open_paren = match.end() - 1
        args = split_arguments(_joined(code[open_paren + 1:balanced(code, open_paren) - 1]))
        passed = _kernels_passed(args[0], code, match.start(), kernels, defined) if len(args) >= 5 else []
        if passed:
            sites += size.sites(args[4], match.start(), match.group("via"), [(*named, None) for named in passed])
    return sites


class _Sizes:
    """The sizes of one file's sites: a number the file settles (more than 0), or, with `compiler`, what the
    compiler may evaluate (`kgate.collect.smem_expressions`) where a kernel's instantiations may give each name
    only the site's scope knows."""

    def __init__(self, path: str, code: str, constants: Constants, compiler: bool) -> None:
        self.path, self.code, self.constants = path, code, constants
        self.compiler = CompilerSizes(code, constants) if compiler else None

    def sites(self, expression: str, position: int, via: str,
              kernels: Sequence[tuple[str, str | None, str | None, int | None]], at: int | None = None
              ) -> list[SmemSite]:
        """The sites a size `expression` (at offset `at`, else `position`) gives `kernels` (identifier, template
        arguments, namespace written, and the offset of the site's line where not `position`)."""
        at = position if at is None else at
        value = self.constants.value(expression, at) if kernels else None
        if value is not None:
            return [SmemSite(self.path, self._line(own, position), name, template, value, via, scope)
                    for name, template, scope, own in kernels] if value > 0 else []
        evaluated = self.compiler.of(expression, at) if self.compiler is not None and kernels else None
        # A size neither settles: the run computes it (`bytes` None), for the kernels the compiler cannot be asked.
        return [SmemSite(self.path, self._line(own, position), name, template, 0, via, scope, evaluated)
                if evaluated is not None and given_by(evaluated, template) else
                SmemSite(self.path, self._line(own, position), name, template, None, via, scope)
                for name, template, scope, own in kernels]

    def _line(self, own: int | None, position: int) -> int:
        return line_of(self.code, position if own is None else own)


def _configured_bytes(code: str, config: str, position: int) -> tuple[str, int] | None:
    """The `dynamicSmemBytes` (its expression and offset) of the configuration a `cudaLaunchKernelEx` at `position`
    passes (`&config`, or a pointer `config`): the last given it in the function before the call, by a member
    assignment (`config.dynamicSmemBytes = ...`, `config->...`) or in its initialiser (`.dynamicSmemBytes = ...`, or
    the third of its positional fields); None where the call passes a configuration the function does not name, or
    another configuration's size is all there is."""
    name = re.fullmatch(r"\s*\(?\s*&?\s*([A-Za-z_]\w*)\s*\)?\s*", config)  # `&cfg`, `(&cfg)`, a pointer `cfg`
    if name is None:
        return None
    variable = re.escape(name.group(1))
    start = _function_start(code, position)
    assigned = re.compile(r"(?<![\w.>])" + variable + r"\s*(?:\.|->)\s*dynamicSmemBytes\s*=(?!=)\s*([^;,{}]+)")
    given: list[tuple[str, int]] = [(m.group(1), m.start(1)) for m in assigned.finditer(code, start, position)]
    for m in re.compile(r"(?<![\w.>])" + variable + r"\s*(?:=\s*)?\{").finditer(code, start, position):
        brace = m.end() - 1
        inner = code[brace + 1:balanced(code, brace, "{", "}") - 1]
        designated = _DYNAMIC_BYTES.search(inner)
        fields = split_arguments(_joined(inner))
        if designated is not None:
            given.append((designated.group(1), brace + 1 + designated.start(1)))
        elif len(fields) >= 3 and not any(f.lstrip().startswith(".") for f in fields):
            given.append((fields[2], brace + 1))
    if not given:
        return None
    return max(given, key=lambda item: item[1])


def _joined(text: str) -> str:
    """A macro's text with its line continuations taken out."""
    return text.replace("\\\n", " ")


def _launched_kernels(code: str, position: int, kernels: set[str], defined: frozenset[str]
                      ) -> list[tuple[str, str | None, str | None, int]]:
    """(kernel identifier, template arguments, namespace written, offset of the identifier) of each kernel the
    `<<<` launch at `position` may launch: the kernel it names, or those a variable it launches through holds
    (`kernel<<<...>>>`, `(*kernel)<<<...>>>`: `_held_kernels`)."""
    variable = _LAUNCHED_VARIABLE.search(code, max(0, position - 256), position)
    if variable is not None and _assigned(code, variable.group(1), position):  # a local name hides a kernel's
        return [(*held, variable.start(1)) for held in _held_kernels(code, variable.group(1), position, kernels,
                                                                     defined)]
    launched = _launched_kernel(code, position, kernels)
    if launched is not None:
        name, template, at = launched
        return [(name, template, _scope_before(code, at, defined), at)]
    if variable is None or variable.group(1) in kernels:
        return []
    return [(*held, variable.start(1)) for held in _held_kernels(code, variable.group(1), position, kernels, defined)]


# The variable a `<<<` launches through: `kernel<<<`, `(*kernel)<<<`.
_LAUNCHED_VARIABLE = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)\s*\)?\s*$")


# What a launch through a variable writes before its `<<<` or as its kernel argument: `kernel`, `(*kernel)`, a cast
# (`(void*)kernel`, `reinterpret_cast<const void*>(kernel)`).
_VARIABLE = re.compile(r"\s*(?:\(\s*[\w\s:]*\*\s*\)|reinterpret_cast\s*<[^<>]*>)?\s*\(?\s*\*?\s*([A-Za-z_]\w*)\s*\)?\s*")


def _kernels_passed(arg: str, code: str, position: int, kernels: set[str], defined: frozenset[str]
                    ) -> list[tuple[str, str | None, str | None]]:
    """The kernels an argument at `position` passes (`_kernel_argument`): the one it names, or those the variable
    it names holds (`auto kernel = &k<T>; cudaFuncSetAttribute(kernel, ...)`: `_held_kernels`)."""
    variable = _VARIABLE.fullmatch(_joined(arg))
    if variable is not None and _assigned(code, variable.group(1), position):  # a local name hides a kernel's
        return _held_kernels(code, variable.group(1), position, kernels, defined)
    named = _kernel_argument(arg, kernels, defined)
    if named is not None:
        return [named]
    return _held_kernels(code, variable.group(1), position, kernels, defined) if variable is not None else []


def _held_kernels(code: str, variable: str, position: int, kernels: set[str], defined: frozenset[str]
                  ) -> list[tuple[str, str | None, str | None]]:
    """The kernels a function-pointer variable may hold at `position`: those named by what the function around it
    assigns it before then, its declaration's initialiser included (`auto kernel = &k<T>;`, `void (*kernel)(float*)
    = big ? k<1> : k<2>;`, `kernel = k<2>;`); a variable the function does not assign (a parameter, one outside any
    function) holds none the file can tell."""
    start, _end = function_body(code, position)
    if start == 0:
        return []
    held: list[tuple[str, str | None, str | None]] = []
    for match in _assignment(variable).finditer(code, start, position):
        value = match.group(1)
        for name in _IDENT.finditer(value):
            found = _kernel_argument(value[name.start():], kernels, defined) if name.group(0) in kernels else None
            if found is not None and found[0] == name.group(0):
                scoped = _scope_before(code, match.start(1) + name.start(), defined)
                held.append((found[0], found[1], scoped))
    return list(dict.fromkeys(held))


def _assignment(variable: str) -> re.Pattern[str]:
    """An assignment of `variable`, its declaration's initialiser included: `kernel = k<2>;`, `void (*kernel)(float*)
    = k;` (the value in group 1)."""
    return re.compile(r"(?<![\w.>:])" + re.escape(variable) + r"\s*(?:\)\s*\([^;{}]*\))?\s*=(?!=)([^;{}]+);")


def _assigned(code: str, variable: str, position: int) -> bool:
    """Whether the function around `position` assigns `variable` before it: a local name (a kernel of that name cannot
    be assigned), which hides a kernel's of the same name."""
    start, _end = function_body(code, position)
    return start != 0 and _assignment(variable).search(code, start, position) is not None


def _launched_kernel(code: str, position: int, kernels: set[str]) -> tuple[str, str | None, int] | None:
    """(kernel identifier, template arguments, offset of the identifier) of the `<<<` launch at `position`: the last
    kernel named between the statement's start and the `<<<`, with nothing after it but its template arguments."""
    start = max(code.rfind(mark, 0, position) for mark in ";{}") + 1
    head = code[start:position]
    for match in reversed(list(_IDENT.finditer(head))):
        if match.group(0) not in kernels:
            continue
        rest = head[match.end():]
        template = None
        if rest.lstrip().startswith("<"):
            offset = len(rest) - len(rest.lstrip())
            end = _template_end(rest, offset)
            template = re.sub(r"\s+", "", _joined(rest[offset:end]))
            rest = rest[end:]
        return (match.group(0), template, start + match.start()) if not _joined(rest).strip() else None
    return None


def _template_end(text: str, start: int) -> int:
    """Index just past the `>` that closes the template argument list opened at `start`: a `>` inside parentheses
    (`k<float, (N > 2)>`) is a comparison, not a bracket."""
    depth = parens = 0
    for index in range(start, len(text)):
        ch = text[index]
        if ch in "([":
            parens += 1
        elif ch in ")]":
            parens = max(0, parens - 1)
        elif parens:
            continue
        elif ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def pdl_launch_sites(text: str, path: str, kernels: set[str], wrappers: tuple[str, ...],
                     headers: tuple[str, ...] = (), given: dict[str, str] | None = None) -> list[LaunchSite]:
    """PDL launch sites in one file's text; `kernels` are the identifiers of the project's kernels; `headers`: the
    texts of the project headers the file includes (which declare the namespaces its launches may name); `given`:
    the macros its compile's flags define."""
    if "cudaLaunchKernelEx" not in text and not any(w in text for w in wrappers):
        return []
    code = without_disabled(shared_blank(text).code)  # a launch under `#if 0` is never compiled
    defined = namespaces(code, *headers)
    constants = Constants(lambda: [*(without_disabled(shared_blank(h).code) for h in headers), code], given)
    sites: list[LaunchSite] = []
    for match in _LAUNCH_EX.finditer(code):
        open_paren = match.end() - 1
        args = split_arguments(code[open_paren + 1:balanced(code, open_paren) - 1])
        if len(args) < 2 or not _pdl_enabled(code, match.start(), constants):
            continue
        sites.extend(LaunchSite(path, line_of(code, match.start()), *site[:2], "cudaLaunchKernelEx", site[2])
                     for site in _kernels_passed(args[1], code, match.start(), kernels, defined))
    for wrapper in wrappers:
        pattern = re.compile(r"(?<![\w:])" + re.escape(wrapper) + r"\s*(?=[<(])")
        for match in pattern.finditer(code):
            position = match.end()
            if code.startswith("<", position):
                position = balanced(code, position, "<", ">")
            open_paren = code.find("(", position)
            if open_paren < 0 or code[position:open_paren].strip():
                continue
            for arg in split_arguments(code[open_paren + 1:balanced(code, open_paren) - 1]):
                site = _kernel_argument(arg, kernels, defined)
                if site is not None:
                    sites.append(LaunchSite(path, line_of(code, match.start()), *site[:2], wrapper, site[2]))
    return sites


def _pdl_enabled(code: str, position: int, constants: Constants) -> bool:
    """Whether the function around a cudaLaunchKernelEx call sets the PDL launch attribute, on as the call is made:
    the last value the function gives it before the call is not one the file settles to 0 (a function that launches
    one kernel with the attribute off, then sets it on for the next, launches that one with PDL)."""
    start = _function_start(code, position)
    region = code[start:position]
    if _PDL_ATTRIBUTE not in region:
        return False
    given = list(_PDL_VALUE.finditer(region))
    return not given or constants.value(given[-1].group("value"), start + given[-1].start("value")) != 0


def _function_start(code: str, position: int) -> int:
    """Offset of the body of the outermost function around `position` (namespace and class blocks skipped)."""
    stack: list[int] = []
    for index in range(position):
        ch = code[index]
        if ch == "{":
            stack.append(index)
        elif ch == "}" and stack:
            stack.pop()
    for index in stack:
        if _FUNCTION_HEAD.search(code, max(0, index - 300), index):
            return index
    return stack[-1] if stack else 0


_FUNCTION_HEAD = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>,\s*&]+)?\s*$")


def _kernel_argument(arg: str, kernels: set[str], defined: frozenset[str] = frozenset()
                     ) -> tuple[str, str | None, str | None] | None:
    """(kernel identifier, template arguments, the namespace written before it: `_scope_before`) of an argument that
    names a kernel, else None."""
    for match in _IDENT.finditer(arg):
        name = match.group(0)
        if name not in kernels:
            continue
        rest = arg[match.end():].lstrip()
        template = None
        if rest.startswith("<"):
            end = _template_end(rest, 0)
            template = re.sub(r"\s+", "", rest[:end])
        return name, template, _scope_before(arg, match.start(), defined)
    return None


_SCOPE = re.compile(r"((?:[A-Za-z_]\w*\s*::\s*)+)$")
# A namespace's definition (`namespace big {`, `inline namespace v1 {`, `namespace ops::big {`), not an alias
# (`namespace bg = big;`).
_NAMESPACE = re.compile(r"\bnamespace\s+([A-Za-z_][\w:\s]*?)\s*\{")


def namespaces(*texts: str) -> frozenset[str]:
    """The names of the namespaces `texts` define (their parts: `ops::big` gives `ops` and `big`)."""
    return frozenset(part.strip() for text in texts if "namespace" in text for match in _NAMESPACE.finditer(text)
                     for part in match.group(1).split("::") if part.strip())


def _scope_before(code: str, at: int, defined: frozenset[str]) -> str | None:
    """The namespaces written before the identifier at `at` (`big::detail::k`: "big::detail"), where each is one the
    file and its headers define (`defined`); None otherwise (none written, or a namespace alias whose kernels the
    name does not tell: the site then names the kernel in any namespace)."""
    found = _SCOPE.search(code, max(0, at - 256), at)
    if found is None:
        return None
    scope = re.sub(r"\s+", "", found.group(1))[:-2]
    return scope if all(part in defined for part in scope.split("::") if part) else None


def pdl_launched(display: str, sites: list[LaunchSite], instantiations: dict[str, set[str]]) -> LaunchSite | None:
    """The launch site that makes a compiled kernel PDL-launched, if any (`applies`)."""
    base, template = base_name(display), _template_of(display)
    known = instantiations.get(base, set())
    return next((site for site in sites if applies(site, base, template, known, display)), None)


def largest_smem(display: str, sites: list[SmemSite], instantiations: dict[str, set[str]]) -> SmemSite | None:
    """Of the sites that give a compiled kernel a number of bytes of dynamic shared memory (`applies`), the one
    that gives the most (a site the compiler sizes counts once its size is evaluated, `bytes` more than 0)."""
    found = [site for site in smem_of(display, sites, instantiations) if site.bytes]
    return max(found, key=lambda site: (site.bytes or 0, site.path, -site.line), default=None)


def unsettled_smem(display: str, sites: list[SmemSite], instantiations: dict[str, set[str]]) -> SmemSite | None:
    """The first of the launches that give a compiled kernel dynamic shared memory of a size the source does not
    settle (a size the run computes: the kernel may get more than any settled site gives), unless a settled
    `cudaFuncSetAttribute` caps what every launch may take (the opt-in is the most a launch gets). An attribute of a
    size the run computes caps nothing and gives nothing: the launches say what the kernel takes."""
    mine = smem_of(display, sites, instantiations)
    if any(site.bytes and site.via == _SET_ATTRIBUTE for site in mine):
        return None
    return min((site for site in mine if site.bytes is None and site.via != _SET_ATTRIBUTE),
               key=lambda site: (site.path, site.line), default=None)


def smem_of(display: str, sites: list[SmemSite], instantiations: dict[str, set[str]]) -> list[SmemSite]:
    """The sites that give a compiled kernel (shown as `display`) dynamic shared memory (`applies`);
    `instantiations`: the template arguments of each kernel template's compiled instantiations, by identifier."""
    base, template = base_name(display), _template_of(display)
    known = instantiations.get(base, set())
    return [site for site in sites if applies(site, base, template, known, display)]


def applies(site: LaunchSite | SmemSite, base: str, template: str | None, known: set[str], display: str = "") -> bool:
    """Whether a site names one compiled kernel (`base` and its `template` arguments; `known`: the template
    arguments of every instantiation compiled; `display`: its name as shown, with its namespaces). A site that names
    template arguments matching one of the kernel's instantiations applies to that instantiation only; a site without
    template arguments, or with arguments that match none (a launcher's own template parameter, a typedef), applies
    to every instantiation. Likewise a site that writes a namespace (`big::k`) applies to the kernel of that name in
    that namespace alone (not `small::k`); one that writes none, to them all."""
    if site.kernel != base or not (site.template is None or site.template == template or site.template not in known):
        return False
    return not site.scope or not display or _in_scope(display, site.scope)


def _in_scope(display: str, scope: str) -> bool:
    """Whether a kernel shown as `display` (`ops::v1::big::k<float>`) lies in the namespace a site wrote (`big`,
    `ops::big`, `::ops::big`): the written names are among its namespaces, in order (an inline namespace between
    them is not written)."""
    shown = iter(part for part in display.split("<", 1)[0].split("(", 1)[0].split("::")[:-1] if part)
    return all(part in shown for part in scope.split("::") if part)


def _template_of(display: str) -> str | None:
    head = display.split("(", 1)[0]
    if "<" not in head:
        return None
    return re.sub(r"\s+", "", head[head.index("<"):])
