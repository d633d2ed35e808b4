"""Kernels bundled with kgate: gated by kgate's own rules, with fp64-referenced precision tests."""
