"""Loggers for third-party experiment trackers (each imports its tracker only when used)."""
