"""Capture: record the Triton specialisations a project's own runs launch (`kgate capture`).

`runtime` runs inside the captured processes (and in compile workers, to bind a registration's
example arguments); `session` runs the command and reads what it recorded. Comparing kgate's compile of
each specialisation with the kernel a GPU loaded (`--verify`) is a run of the pipeline:
`kgate.pipeline.capture_verify`.
"""
