"""Continuous-batching decode over a ``SlotCache``: finished rows are refilled with waiting samples.

Rows are (prompt, sample) requests. A fixed number of slots decode together; when a row ends (its
``max_new_tokens`` reached, known on the host, or EOS, found on the device and read back every
``check_every`` steps) its slot takes the next waiting request: that prompt is prefilled (batched with
the other prompts admitted at the same time) and its keys/values are copied into the free slots.

Everything per step stays on the device: the sampled token, its uniform (``uniforms[row, step]``,
uploaded once per admitted row), the EOS flags and the output buffer. The host only tracks lengths and
write columns, which it knows without reading the device, so a step has no host synchronisation
except the periodic EOS check (and, with the ``candidates`` sampler's ``host`` fallback, its fallback
test; the ``device`` fallback's overflow flag is read with the EOS flags, and a call that overflowed is
decoded again with the ``host`` fallback, so its tokens are the sort's). A row's tokens
depend only on its prompt, its uniforms (its seed) and the model, never on which rows decode beside it
or when it was admitted.

``SlotDecoder`` holds the state of one decode call: ``admit`` (prefill waiting requests into free
slots), ``place`` (copy a prefill into slots and draw each row's first token), ``release`` (free
finished slots), ``compact`` (drop idle slots once nothing waits) and ``step`` (one token for every
slot); ``run`` schedules them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .hf_cache import cache_kw, cache_of
from .prompting import left_padded
from .sampling import resolve_fallback, row_uniforms, sample_next
from .slots import SlotCache, bucket_length

# Drop finished rows from a decoding batch (one copy of its cache) once this share of its rows is idle:
# the rule of both the slot decoder's tail (no request waiting) and the lock-step loop (``hf.py``).
COMPACT_IDLE_SHARE = 0.25


def worth_compacting(idle: int, rows: int) -> bool:
    """Whether a batch of ``rows`` rows, ``idle`` of them finished, should be compacted (``COMPACT_IDLE_SHARE``)."""
    return rows > 1 and idle > 0 and idle / rows >= COMPACT_IDLE_SHARE


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
    sampler: str = "auto"  # nucleus method (``sampling.METHODS``); every method draws the same tokens
    fallback: str = "host"  # how ``candidates`` decides its fallback rows (``sampling.FALLBACKS``); same tokens


class FallbackOverflow(Exception):
    """More rows fell back in one step than the ``device`` fallback sorts: the call is decoded again."""


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
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions.to(device),
        use_cache=True,
        logits_to_keep=1,
    )
    cache = cache_of(out)
    layer_kv = [(layer.keys, layer.values) for layer in cache.layers]
    return out.logits[:, -1, :], layer_kv, width


def decode_capacity(prompts: Sequence[Sequence[int]], max_new_tokens: int, read_floor: int) -> int:
    """Columns a slot needs for the longest prompt and its continuation (bucketed when ``read_floor`` > 0)."""
    capacity = max(len(p) for p in prompts) + max_new_tokens
    return bucket_length(capacity, read_floor) if read_floor > 0 else capacity


class SlotDecoder:
    """One decode call: requests ``r`` (prompt ``prompts[rows[r]]``, seed ``seeds[r]``) through the slots.

    Device state per slot: the current token ``cur``, the tokens written ``step_d``, the request
    ``req_d`` (``trash``, the output's last row, when idle), the EOS flag ``eos_d`` and the row's
    uniforms ``uni``. Host mirror: the request (-1 idle), tokens written and write column per slot.
    """

    def __init__(
        self,
        model: Any,
        prompts: Sequence[Sequence[int]],
        rows: Sequence[int],
        seeds: Sequence[int],
        settings: DecodeSettings,
        eos_ids: Sequence[int],
        pad_id: int,
        device: str,
        forward: Callable[..., Any] | None = None,
        get_cache: Callable[[int, int, int], SlotCache] | None = None,
    ) -> None:
        import torch

        self.model, self.prompts, self.rows, self.seeds = model, prompts, rows, seeds
        self.settings, self.eos_ids, self.pad_id, self.device = settings, list(eos_ids), pad_id, device
        self.step_fn = model if forward is None else forward
        self.n_req = n_req = len(rows)
        self.floor = max(0, settings.read_floor)
        capacity = decode_capacity(prompts, settings.max_new_tokens, self.floor)
        n_layers = int(model.config.num_hidden_layers)
        self.n_slots = n_slots = max(1, settings.slots if settings.fixed_rows else min(settings.slots, n_req))
        if get_cache is None:
            self.cache = SlotCache(n_layers, n_slots, capacity, device)
        else:
            self.cache = get_cache(n_layers, n_slots, capacity)
            self.cache.reset()
        self.capacity = self.cache.capacity
        steps_max = settings.max_new_tokens
        self.eos = torch.tensor(self.eos_ids or [-1], device=device)
        self.out = torch.full((n_req + 1, steps_max), -1, dtype=torch.long, device=device)  # last row: idle sink
        self.trash = n_req
        self.cur = torch.full((n_slots,), pad_id, dtype=torch.long, device=device)
        self.step_d = torch.zeros(n_slots, dtype=torch.long, device=device)
        self.req_d = torch.full((n_slots,), self.trash, dtype=torch.long, device=device)
        self.eos_d = torch.zeros(n_slots, dtype=torch.bool, device=device)
        self.uni = torch.zeros((n_slots, steps_max), dtype=torch.float32, device=device)
        self.req_h = np.full(n_slots, -1, dtype=np.int64)
        self.step_h = np.zeros(n_slots, dtype=np.int64)
        self.col_h = np.zeros(n_slots, dtype=np.int64)
        self.head = self.admissions = self.steps = self.prefilled = 0
        self.shapes: set[tuple[int, int]] = set()
        # Samples of each prompt not admitted yet; a prompt split over two admissions keeps its prefill here.
        self.waiting_of = np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(prompts))
        self.kept: dict[int, tuple[Any, list[tuple[Any, Any]]]] = {}
        on_device = resolve_fallback(settings.fallback, torch.device(device).type) == "device"
        self.overflow = torch.zeros((), dtype=torch.bool, device=device) if on_device else None

    def sample(self, logits: Any, u: Any) -> Any:
        s = self.settings
        return sample_next(logits, u, s.temperature, s.top_p, s.top_k, method=s.sampler, overflow=self.overflow)

    def check_overflow(self) -> None:
        """Raise ``FallbackOverflow`` when a step of the ``device`` fallback left a row unsorted."""
        if self.overflow is not None and bool(self.overflow):
            raise FallbackOverflow

    def place(
        self,
        take: list[int],
        slots_all: list[int],
        uniforms_all: Any,
        chunk: list[int],
        logits: Any,
        layer_kv: list[tuple[Any, Any]],
        width: int,
    ) -> None:
        """Copy the prefill of prompts ``chunk`` into the slots of the requests in ``take`` that use them."""
        import torch

        rows, prompts, device = self.rows, self.prompts, self.device
        local = {p: i for i, p in enumerate(chunk)}
        pick = [j for j, r in enumerate(take) if rows[r] in local]
        slots = torch.tensor([slots_all[j] for j in pick], device=device)
        src = torch.tensor([local[rows[take[j]]] for j in pick], device=device)
        lengths = torch.tensor([len(prompts[rows[take[j]]]) for j in pick], device=device)
        self.cache.fill(slots, layer_kv, src, lengths, width)
        u = uniforms_all[pick]
        first = self.sample(logits[src], u[:, 0])
        reqs = torch.tensor([take[j] for j in pick], device=device)
        self.out[reqs, 0] = first
        self.cur[slots] = first
        self.eos_d[slots] = torch.isin(first, self.eos)
        self.step_d[slots] = 1
        self.req_d[slots] = reqs
        self.uni[slots] = u
        for j in pick:
            s = slots_all[j]
            self.req_h[s], self.step_h[s], self.col_h[s] = take[j], 1, len(prompts[rows[take[j]]])

    def admit(self, free: list[int]) -> None:
        """Give the next waiting requests the ``free`` slots: reuse kept prefills, prefill the other prompts."""
        import torch

        rows, prompts = self.rows, self.prompts
        take = list(range(self.head, min(self.n_req, self.head + len(free))))
        self.head += len(take)
        slots_all = free[: len(take)]
        uniforms_all = torch.from_numpy(row_uniforms([self.seeds[r] for r in take], self.settings.max_new_tokens))
        uniforms_all = uniforms_all.float().to(self.device)
        distinct = list(dict.fromkeys(rows[r] for r in take))
        for r in take:
            self.waiting_of[rows[r]] -= 1
        reused = [p for p in distinct if p in self.kept]
        for p in reused:  # prefilled by an earlier admission: reuse it
            logits, layer_kv = self.kept[p] if self.waiting_of[p] else self.kept.pop(p)
            self.place(take, slots_all, uniforms_all, [p], logits, layer_kv, len(prompts[p]))
        fresh = [p for p in distinct if p not in reused]
        batch = max(1, self.settings.prefill_batch)
        for start in range(0, len(fresh), batch):
            chunk = fresh[start : start + batch]
            logits, layer_kv, width = _prefill(self.model, [prompts[p] for p in chunk], self.pad_id, self.device)
            self.prefilled += len(chunk)
            self.place(take, slots_all, uniforms_all, chunk, logits, layer_kv, width)
            for i, p in enumerate(chunk):
                if self.waiting_of[p]:  # more of its samples wait: keep its prefill (its real columns only)
                    n = len(prompts[p])
                    self.kept[p] = (
                        logits[i : i + 1].clone(),
                        [
                            (k[i : i + 1, :, width - n :].clone(), v[i : i + 1, :, width - n :].clone())
                            for k, v in layer_kv
                        ],
                    )
        self.admissions += 1

    def release(self, slots: list[int]) -> None:
        """Free ``slots``: their later writes go to the output's sink row."""
        import torch

        if slots:
            index = torch.tensor(slots, device=self.device)
            self.req_d[index] = self.trash
            self.eos_d[index] = False
            self.req_h[slots] = -1

    def release_finished(self) -> None:
        """Release the rows that wrote ``max_new_tokens`` tokens (known on the host)."""
        done = (self.req_h >= 0) & (self.step_h >= self.settings.max_new_tokens)
        self.release([int(s) for s in np.nonzero(done)[0]])

    def release_stopped(self) -> None:
        """Release the rows that drew EOS: the decoder's one regular device read-back."""
        stopped = self.eos_d.cpu().numpy()
        self.check_overflow()  # the stream is drained already: no second wait
        self.release([int(s) for s in np.nonzero((self.req_h >= 0) & stopped)[0]])

    def compact(self) -> None:
        """Keep only the live slots (tail compaction, once no request waits)."""
        import torch

        keep_np = np.nonzero(self.req_h >= 0)[0]
        keep = torch.tensor(keep_np, device=self.device)
        self.cache.select(keep)
        self.cur, self.step_d, self.req_d = self.cur[keep], self.step_d[keep], self.req_d[keep]
        self.eos_d, self.uni = self.eos_d[keep], self.uni[keep]
        self.req_h, self.step_h, self.col_h = self.req_h[keep_np], self.step_h[keep_np], self.col_h[keep_np]

    def step(self) -> None:
        """One decode step: every slot's next token, written to its request's row (idle slots: the sink)."""
        import torch

        cache, live = self.cache, self.req_h >= 0
        need = int(self.col_h[live].max()) + 1
        cache.hi = min(self.capacity, bucket_length(need, self.floor) if self.floor else need)
        self.shapes.add((cache.rows, cache.hi))
        logits = self.step_fn(
            input_ids=self.cur.view(-1, 1),
            position_ids=cache.col.view(-1, 1),
            attention_mask=cache.decode_mask(),
            **cache_kw(cache),
            use_cache=True,
        ).logits[:, -1, :]
        index = self.step_d.clamp(max=self.settings.max_new_tokens - 1)
        nxt = self.sample(logits, self.uni.gather(1, index.view(-1, 1)).squeeze(1))
        self.out[self.req_d, index] = nxt
        self.eos_d |= torch.isin(nxt, self.eos)
        self.cur = nxt
        self.step_d = self.step_d + 1
        cache.col.add_(1).clamp_(max=self.capacity - 1)
        self.step_h[live] += 1
        self.col_h[live] += 1
        self.steps += 1

    def run(self) -> DecodeResult:
        """Admit, step and release until every request is done; the tokens of each request, EOS cut."""
        settings, checked_at = self.settings, -1
        while True:
            self.release_finished()
            if checked_at != self.steps and self.steps % max(1, settings.check_every) == 0 and (self.req_h >= 0).any():
                checked_at = self.steps
                self.release_stopped()
            free = [int(s) for s in np.nonzero(self.req_h < 0)[0]]
            waiting = self.n_req - self.head
            if waiting and free and (len(free) >= min(settings.min_admit, waiting) or len(free) == self.cache.rows):
                self.admit(free)
                continue
            live = self.req_h >= 0
            if not live.any():
                break
            if self.head >= self.n_req and not settings.fixed_rows and worth_compacting(int((~live).sum()), len(live)):
                self.compact()
            self.step()
        return self.result()

    def result(self) -> DecodeResult:
        """Tokens per request up to (not including) its first EOS, and whether it stopped there."""
        self.check_overflow()
        eos_set = set(self.eos_ids)
        tokens: list[list[int]] = []
        stopped: list[bool] = []
        for row in self.out[: self.n_req].cpu().tolist():
            cut = next((i for i, t in enumerate(row) if t in eos_set), None)
            tokens.append(row if cut is None else row[:cut])
            stopped.append(cut is not None)
        return DecodeResult(
            tokens=tokens,
            stopped=stopped,
            steps=self.steps,
            admissions=self.admissions,
            stats={
                "slots": self.n_slots,
                "capacity": self.capacity,
                "prefilled_prompts": self.prefilled,
                "step_shapes": sorted(self.shapes),
                "sampler_fallback": "host" if self.overflow is None else "device",
            },
        )


def decode(
    model: Any,
    prompts: Sequence[Sequence[int]],
    rows: Sequence[int],
    seeds: Sequence[int],
    settings: DecodeSettings,
    eos_ids: Sequence[int],
    pad_id: int,
    device: str,
    forward: Callable[..., Any] | None = None,
    get_cache: Callable[[int, int, int], SlotCache] | None = None,
) -> DecodeResult:
    """Generate for every request ``r`` (prompt ``prompts[rows[r]]``, seed ``seeds[r]``), in queue order.

    ``forward`` (default: ``model``) runs one decode step; a compiled or graph-captured version may be
    passed. ``get_cache(layers, rows, capacity)`` may hand out a reused ``SlotCache`` (same buffers across
    calls, as captured steps need); by default each call allocates its own. A call whose ``device``
    fallback overflowed is decoded again with the ``host`` fallback (``stats["fallback_overflow"]``).
    """
    try:
        return SlotDecoder(model, prompts, rows, seeds, settings, eos_ids, pad_id, device, forward, get_cache).run()
    except FallbackOverflow:
        settings = dataclasses.replace(settings, fallback="host")
        result = SlotDecoder(model, prompts, rows, seeds, settings, eos_ids, pad_id, device, forward, get_cache).run()
        result.stats["fallback_overflow"] = True
        return result
