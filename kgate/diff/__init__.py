"""`kgate diff`: the machine code of every kernel variant at two revisions or under two toolchains, compared.

`side` compiles one side through the usual pipeline (collect -> compile, cached); `compare` matches the
variants of two sides by their identity and compares their SASS. Reports are in `kgate.report.diff_report`.
"""
