"""The Ray Data actor of ``corpus score``: builds the scorer once, scores whole shards with ``score_shard``.

Shards arrive as JSON rows of raw records and leave as Arrow IPC bytes, which the driver writes with the
same atomic store call as the local executor.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pyarrow as pa

from ..prompts.readers import RawRecord
from ..promptset.scoring import open_scorer
from .shard import ScoreJob, score_shard


class ShardScorer:
    """A Ray Data actor: builds the scorer once, scores whole shards with ``score_shard``."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = ScoreJob.from_dict(job)
        self.scorer = open_scorer(self.job.scorer, self.job.scorer_options)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"shard": [], "ipc": [], "seconds": []}
        for shard, blob in zip(batch["shard"], batch["raws"], strict=True):
            start = time.perf_counter()
            raws = [RawRecord(loc, record=rec, error=err) for loc, rec, err in json.loads(str(blob))]
            table = score_shard(self.scorer, raws, self.job)
            sink = io.BytesIO()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            out["shard"].append(int(shard))
            out["ipc"].append(sink.getvalue())
            out["seconds"].append(time.perf_counter() - start)
        return out
