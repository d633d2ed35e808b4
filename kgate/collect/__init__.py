"""Collect: what to gate. Configuration, registered kernels, source files.

Nothing here imports the project's code: kernels registered with the
`kgate.register` decorator are found by reading the source.
"""
