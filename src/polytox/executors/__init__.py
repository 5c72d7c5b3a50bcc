"""Executors: how the shards of a run are generated and scored (serial, pipelined, Ray Data).

The runner decides *what* to compute; an executor decides *where and when*. Every executor writes the
same run store, shard by shard, atomically, so they are interchangeable on the same run directory: a run
started with one can be resumed with another and ends with identical parts.
"""

from __future__ import annotations

from ..errors import PolytoxError
from .base import Executor, ExecutorConfig, ExecutorStats, Work

__all__ = ["EXECUTORS", "Executor", "ExecutorConfig", "ExecutorStats", "Work", "build_executor"]

EXECUTORS = ("pipelined", "serial", "ray")


def build_executor(config: ExecutorConfig) -> Executor:
    """The executor named by ``config.kind``."""
    if config.kind == "serial":
        from .local import SerialExecutor

        return SerialExecutor(config)
    if config.kind == "pipelined":
        from .local import PipelinedExecutor

        return PipelinedExecutor(config)
    if config.kind == "ray":
        from .ray_data import RayExecutor

        return RayExecutor(config)
    raise PolytoxError(f"unknown executor {config.kind!r}; known: {', '.join(EXECUTORS)}")
