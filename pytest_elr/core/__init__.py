"""The bottom layer: value types every other part imports and that import nothing of theirs.

``nodes`` (node ids and links), ``specs`` (what a scenario asks for), ``observation`` (what a
backend reports), ``errors`` (the errors that cross layers), ``history`` (the run's event log).
"""
