"""Where CUDA kernels are launched with programmatic dependent launch (PDL), read from the source.

A kernel is PDL-launched when a launch site passes it to `cudaLaunchKernelEx`
(or `cudaLaunchKernelExC`) in a function that sets the attribute
`cudaLaunchAttributeProgrammaticStreamSerialization` (and does not set
`programmaticStreamSerializationAllowed` to 0), or passes it to one of the
project's own launch wrappers (`launch_wrappers = ["pdl::launch"]`). The
kernel argument is recognised by name: an identifier that some `__global__`
declaration of the project defines, with its template arguments if written.
Comments and string literals are blanked first, so neither counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgate.collect.cpp_text import balanced, blank, line_of, split_arguments
from kgate.collect.cuda_names import base_name

_LAUNCH_EX = re.compile(r"\bcudaLaunchKernelExC?\s*(?:<[^;()]*>\s*)?\(")
_PDL_ATTRIBUTE = "cudaLaunchAttributeProgrammaticStreamSerialization"
_PDL_OFF = re.compile(r"programmaticStreamSerializationAllowed\s*=\s*(?:0|false)\b")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class LaunchSite:
    path: str
    line: int
    kernel: str  # the identifier of the kernel launched
    template: str | None  # its template arguments as written, without spaces ("<__half,128>"), if any
    via: str  # "cudaLaunchKernelEx" or the wrapper's name


def pdl_launch_sites(text: str, path: str, kernels: set[str], wrappers: tuple[str, ...]) -> list[LaunchSite]:
    """PDL launch sites in one file's text; `kernels` are the identifiers of the project's kernels."""
    if "cudaLaunchKernelEx" not in text and not any(w in text for w in wrappers):
        return []
    code = blank(text).code
    sites: list[LaunchSite] = []
    for match in _LAUNCH_EX.finditer(code):
        open_paren = match.end() - 1
        args = split_arguments(code[open_paren + 1:balanced(code, open_paren) - 1])
        if len(args) < 2 or not _pdl_enabled(code, match.start()):
            continue
        site = _kernel_argument(args[1], kernels)
        if site is not None:
            sites.append(LaunchSite(path, line_of(code, match.start()), site[0], site[1], "cudaLaunchKernelEx"))
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
                site = _kernel_argument(arg, kernels)
                if site is not None:
                    sites.append(LaunchSite(path, line_of(code, match.start()), site[0], site[1], wrapper))
    return sites


def _pdl_enabled(code: str, position: int) -> bool:
    """Whether the function around a cudaLaunchKernelEx call sets the PDL launch attribute (on)."""
    region = code[_function_start(code, position):position]
    return _PDL_ATTRIBUTE in region and not _PDL_OFF.search(region)


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


def _kernel_argument(arg: str, kernels: set[str]) -> tuple[str, str | None] | None:
    """(kernel identifier, template arguments) of an argument that names a kernel, else None."""
    for match in _IDENT.finditer(arg):
        name = match.group(0)
        if name not in kernels:
            continue
        rest = arg[match.end():].lstrip()
        template = None
        if rest.startswith("<"):
            end = balanced(rest, 0, "<", ">")
            template = re.sub(r"\s+", "", rest[:end])
        return name, template
    return None


def pdl_launched(display: str, sites: list[LaunchSite], instantiations: dict[str, set[str]]) -> LaunchSite | None:
    """The launch site that makes a compiled kernel PDL-launched, if any.

    A site that names template arguments matching one of the kernel's
    instantiations applies to that instantiation only; a site without
    template arguments, or with arguments that match none (a launcher's own
    template parameter, a typedef), applies to every instantiation.
    """
    base = base_name(display)
    template = _template_of(display)
    known = instantiations.get(base, set())
    for site in sites:
        if site.kernel != base:
            continue
        if site.template is None or site.template == template or site.template not in known:
            return site
    return None


def _template_of(display: str) -> str | None:
    head = display.split("(", 1)[0]
    if "<" not in head:
        return None
    return re.sub(r"\s+", "", head[head.index("<"):])
