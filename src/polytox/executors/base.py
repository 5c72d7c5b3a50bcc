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

from .. import settings as S
from ..errors import PolytoxError
from ..scoring import Scorer
from ..spec import EvalSpec
from ..store import RunStore
from ..types import Prompt

ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True)
@S.from_table("executor")
class ExecutorConfig:
    """How to run (not *what*: none of this is in the spec or its hash, so it may change on resume).

    ``queue_depth``: finished generation shards allowed to wait for the scorer (pipelined, memory bound).
    Ray: ``ray_address`` (None = start a local Ray, ``auto`` = the running cluster), actors per pool,
    GPUs and CPUs per actor. Each field's default, range and refusal are its row of the settings table
    (section ``executor``).
    """

    kind: str = S.TABLE_DEFAULT
    queue_depth: int = S.TABLE_DEFAULT
    ray_address: str | None = S.TABLE_DEFAULT
    gen_workers: int = S.TABLE_DEFAULT
    score_workers: int = S.TABLE_DEFAULT
    gpus_per_gen_worker: float = S.TABLE_DEFAULT
    gpus_per_score_worker: float = S.TABLE_DEFAULT
    cpus_per_worker: float = S.TABLE_DEFAULT

    def __post_init__(self) -> None:
        problems = S.check_fields(self, "executor")
        if problems:
            raise PolytoxError(problems[0])


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
