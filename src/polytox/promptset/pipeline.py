"""Composable pipeline steps over an iterator of documents (datatrove's shape).

A step is a small picklable object: ``step(docs, ctx) -> docs``. It reads documents lazily and yields
the ones it keeps; the ones it drops go to ``ctx.reject`` with a reason, and everything it does is
counted in ``ctx.counters[step.name]``. Because a step only sees an iterator and a context, the same list
of steps runs on one shard here, and could run on many shards in parallel (Ray, multiprocessing) with
one context per shard, summed afterwards (``merge_counters``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .document import Document, Rejected


@dataclass
class StepContext:
    """Per-shard bookkeeping handed to every step: counters by step and the rejected records."""

    counters: dict[str, Counter[str]] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)
    transient_failures: int = 0

    def count(self, step: str, key: str, n: int = 1) -> None:
        self.counters.setdefault(step, Counter())[key] += n

    def reject(self, item: Rejected) -> None:
        self.rejected.append(item)
        self.count(item.step, "rejected")
        self.count(item.step, f"rejected:{item.reason.split(':', 1)[0]}")

    def counters_dict(self) -> dict[str, dict[str, int]]:
        return {step: dict(sorted(c.items())) for step, c in self.counters.items()}


class Step(ABC):
    """One pipeline step. Subclasses set ``name`` and implement ``run``."""

    name: ClassVar[str] = "step"

    @abstractmethod
    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        """Yield the documents this step keeps (possibly changed or expanded)."""

    def __call__(self, docs: Iterable[Document], ctx: StepContext) -> Iterator[Document]:
        for doc in self.run(iter(docs), ctx):
            ctx.count(self.name, "out")
            yield doc

    def describe(self) -> dict[str, Any]:
        """What the build manifest records about this step."""
        return {"step": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (scorers, models)."""


def counted_input(name: str, docs: Iterable[Document], ctx: StepContext) -> Iterator[Document]:
    for doc in docs:
        ctx.count(name, "in")
        yield doc


def compose(steps: Sequence[Step], docs: Iterable[Document], ctx: StepContext) -> Iterator[Document]:
    """Chain the steps lazily: the output iterator of one is the input of the next."""
    stream: Iterable[Document] = docs
    for step in steps:
        stream = step(counted_input(step.name, stream, ctx), ctx)
    return iter(stream)


def merge_counters(parts: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """Sum per-step counters of several shards."""
    total: dict[str, Counter[str]] = {}
    for part in parts:
        for step, counts in part.items():
            total.setdefault(step, Counter()).update(counts)
    return {step: dict(sorted(c.items())) for step, c in total.items()}
