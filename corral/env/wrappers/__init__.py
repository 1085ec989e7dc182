"""Adapters from other environment libraries to corral's env interfaces."""
