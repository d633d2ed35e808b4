"""Facts: what the compiler produced, parsed into immutable records.

Parsers here read text (PTX, SASS, ptxas logs) and never run a tool.
"""
