"""Ray Data versions of ``corpus score`` and of the overlap join (``pip install 'polytox[ray]'``).

Scoring: the driver streams the raw records and cuts them into the same shards as the local run; shards
go to Ray Data in windows of ``WINDOW_SHARDS_PER_WORKER * workers`` rows (64 per worker) (so the driver holds a bounded
number of documents), through an actor pool of ``--score-workers`` actors, each building the scorer once
(``--score-gpus-per-worker`` GPUs, ``--cpus-per-worker`` CPUs). Each actor runs the same ``score_shard``
as the local executor and sends the part back as Arrow IPC bytes; the driver writes it with the same
atomic store call. So a shard's part is identical whichever executor made it, a run may be resumed with
the other executor, and the statistics are the same. The actor pool is rebuilt per window: its start-up
(scorer load) is paid once per window, which is why windows are many shards long.

Overlap: ``ray_band_candidates`` partitions the LSH join by band. Every MinHash signature is cut into
the same ``b`` bands of ``r`` rows as ``datasketch.MinHashLSH`` uses for the threshold; one Ray task per
band joins A and B on the band's bytes, and the union of the bands' pairs is exactly the set of
candidates the single-process index returns. Candidates are then confirmed by exact Jaccard on the
driver, as in the local run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import require
from ..executors import ExecutorConfig
from ..executors.ray_start import closing_rows, ray_session, start_ray
from ..prompts.readers import RawRecord
from ..scoring import Scorer
from .minhash import band_join
from .shard_scorer import ShardScorer

WINDOW_SHARDS_PER_WORKER = 64


def _raws_to_rows(raws: list[RawRecord]) -> list[list[Any]]:
    return [[r.location, r.record, r.error] for r in raws]


def _windows(todo: Iterator[tuple[int, list[RawRecord]]], size: int) -> Iterator[list[tuple[int, list[RawRecord]]]]:
    window: list[tuple[int, list[RawRecord]]] = []
    for item in todo:
        window.append(item)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


def ray_score(
    job: Any,
    store: Any,
    scorer: Scorer,
    todo: Iterator[tuple[int, list[RawRecord]]],
    config: ExecutorConfig,
    summary: Any,
    progress: Any,
) -> dict[str, Any]:
    """Score the ``todo`` shards on Ray Data; parts are written on the driver (see the module docstring)."""
    import itertools
    import json

    ray = require("ray", "ray")
    workers = config.score_workers
    details: dict[str, Any] = {
        "executor": "ray",
        "score_workers": workers,
        "ray_address": config.ray_address,
        "gpus_per_score_worker": config.gpus_per_score_worker,
        "windows": 0,
        "actor_seconds": 0.0,
    }
    head = next(todo, None)
    if head is None:  # nothing left to score: no Ray start-up
        return details
    todo = itertools.chain([head], todo)
    started = start_ray(config.ray_address, workers * config.cpus_per_worker + 1)
    job_dict = job.to_dict()
    cache = getattr(getattr(scorer, "cache", None), "path", None)
    if cache is not None and job_dict["scorer_options"].get("cache") != "off":
        job_dict["scorer_options"] = {**job_dict["scorer_options"], "cache": str(cache)}
    wall = time.perf_counter()
    first: float | None = None
    steady_docs = 0
    with ray_session(ray, started):
        for window in _windows(todo, WINDOW_SHARDS_PER_WORKER * workers):
            rows = [
                {"shard": i, "raws": json.dumps(_raws_to_rows(r), ensure_ascii=False, default=str)} for i, r in window
            ]
            ds = ray.data.from_items(rows, override_num_blocks=len(rows))
            ds = ds.map_batches(
                ShardScorer,
                fn_constructor_kwargs={"job": job_dict},
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_gpus=config.gpus_per_score_worker,
                num_cpus=config.cpus_per_worker,
            )
            with closing_rows(ds.iter_rows()) as window_rows:
                for row in window_rows:
                    table = pa.ipc.open_stream(row["ipc"]).read_all()
                    if first is None:  # Ray start-up, actor start and scorer load end here
                        first = time.perf_counter()
                        details["first_result_seconds"] = round(first - wall, 3)
                    else:
                        steady_docs += table.num_rows
                    store.write_part(int(row["shard"]), table)
                    summary.shards_scored += 1
                    summary.documents_scored_now += table.num_rows
                    details["actor_seconds"] += float(row["seconds"])
                    if progress is not None:
                        progress(summary.documents_scored_now, summary.shards_scored)
            details["windows"] += 1
    details["actor_seconds"] = round(details["actor_seconds"], 3)
    if first is not None:  # steady state: from the first finished shard to the last
        details["steady_seconds"] = round(time.perf_counter() - first, 3)
        details["steady_docs"] = steady_docs
    return details


# ---- overlap: the LSH join partitioned by band --------------------------------------------------------
def ray_band_candidates(
    a_keys: np.ndarray,
    a_sigs: np.ndarray,
    b_keys: np.ndarray,
    b_sigs: np.ndarray,
    bands: int,
    rows: int,
    config: ExecutorConfig,
) -> set[tuple[int, int]]:
    """Candidate pairs of the banded LSH join, one Ray task per band (see the module docstring)."""
    ray = require("ray", "ray")
    started = start_ray(config.ray_address, config.score_workers * config.cpus_per_worker + 1)
    try:
        join = ray.remote(num_cpus=config.cpus_per_worker)(band_join)
        a_ref, b_ref = ray.put(a_keys), ray.put(b_keys)
        futures = [
            join.remote(
                i,
                a_ref,
                np.ascontiguousarray(a_sigs[:, i * rows : (i + 1) * rows]),
                b_ref,
                np.ascontiguousarray(b_sigs[:, i * rows : (i + 1) * rows]),
            )
            for i in range(bands)
        ]
        out: set[tuple[int, int]] = set()
        for pairs in ray.get(futures):
            out.update(pairs)
        return out
    finally:
        if started:
            ray.shutdown()
