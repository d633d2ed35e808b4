"""A function that launches one kernel with the PDL attribute off and then sets it on for the next launches that one
with PDL: each `cudaLaunchKernelEx` is judged by the value the attribute has as it is made, not by any 0 written
somewhere in the function (which left the PDL kernel unchecked by KG107); a value the file settles to 0 (a macro)
is off, as `0` is."""

from __future__ import annotations

from kgate.collect.cuda_launches import pdl_launch_sites

LAUNCHER = """\
void launch(float* x, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 0;
  cudaLaunchConfig_t cfg = {};
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, first, x);
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchKernelEx(&cfg, second, x);
}
void off(float* x) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = false;
  cudaLaunchKernelEx(&cfg, third, x);
}
#define OVERLAP 0
void macro(float* x) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = OVERLAP;
  cudaLaunchKernelEx(&cfg, fifth, x);
}
void flag(float* x, bool pdl) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl;
  cudaLaunchKernelEx(&cfg, fourth, x);
}
"""


def test_each_launch_is_pdl_as_the_attribute_stands_when_it_is_made() -> None:
    sites = pdl_launch_sites(LAUNCHER, "l.cu", {"first", "second", "third", "fourth", "fifth"}, ())
    assert [(site.kernel, site.line) for site in sites] == [("second", 10), ("fourth", 29)], sites
