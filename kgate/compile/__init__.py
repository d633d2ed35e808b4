"""Compile: registered kernels -> compiler artifacts -> facts, cached and in parallel."""
