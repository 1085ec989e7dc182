"""Replay buffers of RLlib 1.13's execution plans (`execution.buffers`)."""
