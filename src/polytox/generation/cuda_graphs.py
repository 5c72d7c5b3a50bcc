"""The eager decode step captured as CUDA graphs: one graph per (rows, read length), no compiler.

A decode step of a small model over a few hundred rows is a few hundred short kernels, and in eager mode
most of its time is Python and launch overhead. ``torch.compile(mode="reduce-overhead")`` removes that but
pays tens of seconds of compilation per shape. Capturing the eager step as a CUDA graph removes the same
overhead for the cost of one more step per shape: the first time a shape is met the step runs eagerly
(its result is used) and is then captured; later steps copy their inputs into the graph's buffers and
replay it.

Capture needs fixed addresses: the ``SlotCache`` buffers are reused across decode calls (the decoder's
``get_cache``), and the graphs are dropped when the cache is reallocated. All graphs share one memory
pool (they are replayed one at a time).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from .hf_cache import cache_name


class GraphedStep:
    """Callable like the model's forward for decode steps; replays captured graphs of ``model``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.graphs: dict[tuple[int, int], tuple[Any, Any, Any, Any, Any]] = {}
        self.pool: Any = None
        self.buffers: tuple[int, ...] = ()
        self.captures = 0
        self.capture_seconds = 0.0

    def __call__(self, *, input_ids: Any, position_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
        import torch

        cache = kwargs[cache_name()]
        buffers = (cache.allocation, cache.keys[0].data_ptr(), cache.col.data_ptr(), cache._row_index.data_ptr())
        if buffers != self.buffers:  # new cache buffers: graphs captured on the old ones are invalid
            self.graphs.clear()
            self.buffers = buffers
        key = (int(input_ids.shape[0]), int(attention_mask.shape[-1]))
        entry = self.graphs.get(key)
        if entry is not None:
            graph, ids, pos, mask, logits = entry
            ids.copy_(input_ids)
            pos.copy_(position_ids)
            mask.copy_(attention_mask)
            graph.replay()
            return SimpleNamespace(logits=logits)
        started = time.perf_counter()
        ids, pos, mask = input_ids.clone(), position_ids.clone(), attention_mask.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up run is this step: it writes the cache and gives the logits
            result = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, **kwargs).logits
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # recorded, not run: nothing is written twice; other threads (a GPU scorer) may use CUDA meanwhile
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            logits = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, **kwargs).logits
        self.pool = graph.pool()
        self.graphs[key] = (graph, ids, pos, mask, logits)
        self.captures += 1
        self.capture_seconds += time.perf_counter() - started
        return SimpleNamespace(logits=result)
