"""Utilities with no pipeline knowledge: atomic files, JSON, recorded reads, the cache folder, signals, external tools."""
