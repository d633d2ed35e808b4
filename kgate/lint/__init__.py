"""`kgate lint`: source rules over files, without compiling and without importing the project's code.

`engine` runs the rules (byte pre-filter first, one parse per file),
`cache` remembers per-file results between runs.
"""
