"""Continuous-batching decode over a ``SlotCache``: finished rows are refilled with waiting samples.

Rows are (prompt, sample) requests. A fixed number of slots decode together; when a row ends (its
``max_new_tokens`` reached, known on the host, or EOS, found on the device and read back every
``check_every`` steps) its slot takes the next waiting request: that prompt is prefilled (batched with
the other prompts admitted at the same time) and its keys/values are copied into the free slots.

Everything per step stays on the device: the sampled token, its uniform (``uniforms[row, step]``,
uploaded once per admitted row), the EOS flags and the output buffer. The host only tracks lengths and
write columns, which it knows without reading the device, so a step has no host synchronisation
except the periodic EOS check. A row's tokens depend only on its prompt, its uniforms (its seed) and the
model, never on which rows decode beside it or when it was admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .hf_cache import cache_kw, cache_of
from .prompting import left_padded
from .sampling import row_uniforms, sample_next
from .slots import SlotCache, bucket_length

# Once no request is waiting, drop finished slots from the batch when this share of them is idle.
TAIL_COMPACT_SHARE = 0.25


@dataclass
class DecodeSettings:
    """How the decoder samples and schedules (from the ``GenerationSpec`` and its options)."""

    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    slots: int  # rows decoding together
    prefill_batch: int  # prompts per prefill forward pass
    check_every: int = 1  # steps between EOS read-backs (1 on CPU, where a read-back costs nothing)
    min_admit: int = 1  # free slots needed before an admission (a prefill) is worth it
    read_floor: int = 0  # >0: read lengths and capacity in ``bucket_length`` steps, at least this (few shapes)
    fixed_rows: bool = False  # always ``slots`` rows, no tail compaction (one row count for compiled steps)


@dataclass
class DecodeResult:
    """Generated token ids (EOS excluded) and whether each row stopped at EOS."""

    tokens: list[list[int]]
    stopped: list[bool]
    steps: int = 0
    admissions: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def _prefill(model: Any, prompts: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[Any, list[Any], int]:
    """Left-padded prefill of ``prompts``: last-position logits ``[P, V]`` and per-layer (keys, values)."""
    ids, mask, positions = left_padded(prompts, pad_id)
    width = ids.shape[1]
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                use_cache=True, logits_to_keep=1)
    cache = cache_of(out)
    layer_kv = [(layer.keys, layer.values) for layer in cache.layers]
    return out.logits[:, -1, :], layer_kv, width


def decode(model: Any, prompts: Sequence[Sequence[int]], rows: Sequence[int], seeds: Sequence[int],
           settings: DecodeSettings, eos_ids: Sequence[int], pad_id: int, device: str,
           forward: Callable[..., Any] | None = None,
           get_cache: Callable[[int, int, int], SlotCache] | None = None) -> DecodeResult:
    """Generate for every request ``r`` (prompt ``prompts[rows[r]]``, seed ``seeds[r]``), in queue order.

    ``forward`` (default: ``model``) runs one decode step; a compiled or graph-captured version may be
    passed. ``get_cache(layers, rows, capacity)`` may hand out a reused ``SlotCache`` (same buffers across
    calls, as captured steps need); by default each call allocates its own.
    """
    import torch

    steps_max = settings.max_new_tokens
    n_req = len(rows)
    capacity = max(len(p) for p in prompts) + steps_max
    floor = max(0, settings.read_floor)
    if floor:
        capacity = bucket_length(capacity, floor)
    n_layers = int(model.config.num_hidden_layers)
    n_slots = max(1, settings.slots if settings.fixed_rows else min(settings.slots, n_req))
    if get_cache is None:
        cache = SlotCache(n_layers, n_slots, capacity, device)
    else:
        cache = get_cache(n_layers, n_slots, capacity)
        cache.reset()
    capacity = cache.capacity
    step_fn = model if forward is None else forward
    eos = torch.tensor(list(eos_ids) or [-1], device=device)
    out = torch.full((n_req + 1, steps_max), -1, dtype=torch.long, device=device)  # last row: idle slots' sink
    trash = n_req

    # Device state per slot.
    cur = torch.full((n_slots,), pad_id, dtype=torch.long, device=device)
    step_d = torch.zeros(n_slots, dtype=torch.long, device=device)
    req_d = torch.full((n_slots,), trash, dtype=torch.long, device=device)
    eos_d = torch.zeros(n_slots, dtype=torch.bool, device=device)
    uni = torch.zeros((n_slots, steps_max), dtype=torch.float32, device=device)
    # Host mirror: request in each slot (-1 idle), tokens written so far, write column.
    req_h = np.full(n_slots, -1, dtype=np.int64)
    step_h = np.zeros(n_slots, dtype=np.int64)
    col_h = np.zeros(n_slots, dtype=np.int64)
    queue = list(range(n_req))
    head = 0
    admissions = 0
    steps = 0
    prefilled = 0
    shapes: set[tuple[int, int]] = set()
    # Samples of each prompt not admitted yet; a prompt split over two admissions keeps its prefill here.
    waiting_of = np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(prompts))
    kept: dict[int, tuple[Any, list[tuple[Any, Any]]]] = {}

    def sample(logits: Any, u: Any) -> Any:
        return sample_next(logits, u, settings.temperature, settings.top_p, settings.top_k)

    def place(take: list[int], slots_all: list[int], uniforms_all: Any, chunk: list[int], logits: Any,
              layer_kv: list[tuple[Any, Any]], width: int) -> None:
        """Copy the prefill of prompts ``chunk`` into the slots of the requests in ``take`` that use them."""
        local = {p: i for i, p in enumerate(chunk)}
        pick = [j for j, r in enumerate(take) if rows[r] in local]
        slots = torch.tensor([slots_all[j] for j in pick], device=device)
        src = torch.tensor([local[rows[take[j]]] for j in pick], device=device)
        lengths = torch.tensor([len(prompts[rows[take[j]]]) for j in pick], device=device)
        cache.fill(slots, layer_kv, src, lengths, width)
        u = uniforms_all[pick]
        first = sample(logits[src], u[:, 0])
        reqs = torch.tensor([take[j] for j in pick], device=device)
        out[reqs, 0] = first
        cur[slots] = first
        eos_d[slots] = torch.isin(first, eos)
        step_d[slots] = 1
        req_d[slots] = reqs
        uni[slots] = u
        for j in pick:
            s = slots_all[j]
            req_h[s], step_h[s], col_h[s] = take[j], 1, len(prompts[rows[take[j]]])

    def admit(free: list[int]) -> None:
        nonlocal head, admissions, prefilled
        take = queue[head: head + len(free)]
        head += len(take)
        slots_all = free[: len(take)]
        uniforms_all = torch.from_numpy(row_uniforms([seeds[r] for r in take], steps_max)).float().to(device)
        distinct = list(dict.fromkeys(rows[r] for r in take))
        for r in take:
            waiting_of[rows[r]] -= 1
        reused = [p for p in distinct if p in kept]
        for p in reused:  # prefilled by an earlier admission: reuse it
            logits, layer_kv = kept[p] if waiting_of[p] else kept.pop(p)
            place(take, slots_all, uniforms_all, [p], logits, layer_kv, len(prompts[p]))
        fresh = [p for p in distinct if p not in reused]
        for start in range(0, len(fresh), max(1, settings.prefill_batch)):
            chunk = fresh[start: start + max(1, settings.prefill_batch)]
            logits, layer_kv, width = _prefill(model, [prompts[p] for p in chunk], pad_id, device)
            prefilled += len(chunk)
            place(take, slots_all, uniforms_all, chunk, logits, layer_kv, width)
            for i, p in enumerate(chunk):
                if waiting_of[p]:  # more of its samples wait: keep its prefill (its real columns only)
                    n = len(prompts[p])
                    kept[p] = (logits[i: i + 1].clone(),
                               [(k[i: i + 1, :, width - n:].clone(), v[i: i + 1, :, width - n:].clone())
                                for k, v in layer_kv])
        admissions += 1
    def release(slots: list[int]) -> None:
        if slots:
            index = torch.tensor(slots, device=device)
            req_d[index] = trash
            eos_d[index] = False
            req_h[slots] = -1

    checked_at = -1
    while True:
        release([int(s) for s in np.nonzero((req_h >= 0) & (step_h >= steps_max))[0]])
        if checked_at != steps and steps % max(1, settings.check_every) == 0 and (req_h >= 0).any():
            checked_at = steps
            stopped = eos_d.cpu().numpy()  # the one device read-back: which rows hit EOS
            release([int(s) for s in np.nonzero((req_h >= 0) & stopped)[0]])
        free = [int(s) for s in np.nonzero(req_h < 0)[0]]
        waiting = n_req - head
        if waiting and free and (len(free) >= min(settings.min_admit, waiting) or len(free) == cache.rows):
            admit(free)
            continue
        live = req_h >= 0
        if not live.any():
            break
        if (head >= n_req and not settings.fixed_rows and (~live).mean() >= TAIL_COMPACT_SHARE
                and cache.rows > 1):
            keep_np = np.nonzero(live)[0]
            keep = torch.tensor(keep_np, device=device)
            cache.select(keep)
            cur, step_d, req_d, eos_d, uni = cur[keep], step_d[keep], req_d[keep], eos_d[keep], uni[keep]
            req_h, step_h, col_h = req_h[keep_np], step_h[keep_np], col_h[keep_np]
            live = req_h >= 0
        need = int(col_h[live].max()) + 1
        cache.hi = min(capacity, bucket_length(need, floor) if floor else need)
        shapes.add((cache.rows, cache.hi))
        logits = step_fn(input_ids=cur.view(-1, 1), position_ids=cache.col.view(-1, 1),
                         attention_mask=cache.decode_mask(), **cache_kw(cache), use_cache=True).logits[:, -1, :]
        index = step_d.clamp(max=steps_max - 1)
        nxt = sample(logits, uni.gather(1, index.view(-1, 1)).squeeze(1))
        out[req_d, index] = nxt
        eos_d |= torch.isin(nxt, eos)
        cur = nxt
        step_d = step_d + 1
        cache.col.add_(1).clamp_(max=capacity - 1)
        step_h[live] += 1
        col_h[live] += 1
        steps += 1

    tokens_all = out[:n_req].cpu().tolist()
    eos_set = set(eos_ids)
    tokens: list[list[int]] = []
    stopped_rows: list[bool] = []
    for row in tokens_all:
        cut = next((i for i, t in enumerate(row) if t in eos_set), None)
        tokens.append(row if cut is None else row[:cut])
        stopped_rows.append(cut is not None)
    return DecodeResult(tokens=tokens, stopped=stopped_rows, steps=steps, admissions=admissions,
                        stats={"slots": n_slots, "capacity": capacity, "prefilled_prompts": prefilled,
                               "step_shapes": sorted(shapes)})
