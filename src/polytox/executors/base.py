"""The executor contract: run every unfinished shard of a plan into the store; return timing stats.

An executor must keep the run store's properties: a shard's generation part is written before its score
part, each part atomically, and a shard's content depends only on the spec and the shard (never on which
worker or in what order it ran), so any interruption and any executor resume to the same result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import PolytoxError
from ..scoring import Scorer
from ..spec import EvalSpec
from ..store import RunStore
from ..types import Prompt

ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ExecutorConfig:
    """How to run (not *what*: none of this is in the spec or its hash, so it may change on resume).

    ``queue_depth``: finished generation shards allowed to wait for the scorer (pipelined, memory bound).
    Ray: ``ray_address`` (None = start a local Ray, ``auto`` = the running cluster), actors per pool,
    GPUs and CPUs per actor.
    """

    kind: str = "pipelined"
    queue_depth: int = 2
    ray_address: str | None = None
    gen_workers: int = 1
    score_workers: int = 1
    gpus_per_gen_worker: float = 0.0
    gpus_per_score_worker: float = 0.0
    cpus_per_worker: float = 1.0

    def __post_init__(self) -> None:
        checks = [
            (self.queue_depth >= 1, "queue_depth must be >= 1"),
            (self.gen_workers >= 1 and self.score_workers >= 1, "workers must be >= 1"),
            (min(self.gpus_per_gen_worker, self.gpus_per_score_worker) >= 0, "GPUs per worker must be >= 0"),
            (self.cpus_per_worker > 0, "cpus_per_worker must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise PolytoxError(f"invalid executor settings: {message}")


@dataclass
class Work:
    """Everything an executor needs: the resolved spec, the store, the shard plan, the scorer."""

    spec: EvalSpec
    store: RunStore
    plan: list[list[Prompt]]
    scorer: Scorer
    langs: dict[str, str]
    report: ProgressCallback = field(default=lambda stage, done, total: None)

    @property
    def total(self) -> int:
        return sum(len(s) for s in self.plan) * self.spec.generation.samples


@dataclass
class ExecutorStats:
    """Where the time went. ``wait_for_scores_seconds``: time generation sat idle waiting for the scorer
    (serial: all of the scoring time; pipelined: only when the scorer is the bottleneck)."""

    executor: str
    shards_total: int = 0
    shards_generated: int = 0
    shards_scored: int = 0
    generate_seconds: float = 0.0
    score_seconds: float = 0.0
    wait_for_scores_seconds: float = 0.0
    wall_seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 4)
        return out


class Executor(ABC):
    """Base class: ``run(work)`` generates and scores every shard whose parts are missing."""

    name = "executor"

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config

    @abstractmethod
    def run(self, work: Work) -> ExecutorStats:
        """Complete every shard of ``work.plan`` in ``work.store``."""
