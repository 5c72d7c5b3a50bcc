"""How many rows the slot decoder runs per step: as many as the run has requests and the device has memory.

At a small model's size a decode step is bound by reading the weights until a few hundred rows, so a
larger batch costs little extra per step and the tokens per second grow with it. The slot count is
chosen per decode call (``plan_slots``):

- wanted: every request of the call in flight at once, rounded up on a ladder ``base * 2**k`` (``base``:
  the spec's ``batch_size * samples``), so the row counts a run meets are few (CUDA graphs and compiled
  steps are per row count);
- allowed: ``SLOT_MEMORY_SHARE`` of the device's free memory over the bytes a row needs (its key/value
  cache at the call's capacity, plus its float32 logits and the sampler's temporaries over the
  vocabulary), and at most ``MAX_SLOTS``;
- grow only: under fixed-row decoding (graphs, compiled steps) a call never takes fewer rows than the
  previous one, so the cache and the captured graphs are reallocated at most once per ladder rung.

Where no free-memory figure exists (CPU, MPS) the slot count stays at ``base``: a CPU decode step is
compute-bound, so more rows would not pay. The plan, with its byte counts, is in the run manifest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Upper bound of rows per decode step (the ladder's top; a 1B model at RTP settings needs ~3 MiB a row).
MAX_SLOTS = 4096
# Share of the device's free memory (measured when a call starts) the slots may take.
SLOT_MEMORY_SHARE = 0.5
# Bytes per vocabulary entry per row for one step's logits and sampling: float32 logits, probabilities,
# sorted values (float32) and token ids (int64), cumulative sums (float32), plus the model's own logits.
STEP_BYTES_PER_VOCAB = 28


@dataclass
class SlotPlan:
    """The rows of one decode call and the memory they were planned for (bytes)."""

    rows: int
    base: int
    requests: int
    kv_bytes_per_row: int
    step_bytes_per_row: int
    budget_bytes: int | None
    reason: str

    @property
    def planned_bytes(self) -> int:
        return self.rows * (self.kv_bytes_per_row + self.step_bytes_per_row)

    def manifest(self) -> dict[str, Any]:
        """The plan as the run manifest records it, with the planned bytes in GiB for reading."""
        return {
            **asdict(self),
            "planned_bytes": self.planned_bytes,
            "planned_gib": round(self.planned_bytes / 2**30, 3),
        }


def kv_bytes_per_row(config: Any, capacity: int, dtype_bytes: int) -> int:
    """Key and value bytes one slot of ``capacity`` columns holds for a transformers model ``config``."""
    layers = int(config.num_hidden_layers)
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return 2 * layers * kv_heads * head_dim * capacity * dtype_bytes


def ladder(base: int, maximum: int = MAX_SLOTS) -> list[int]:
    """The row counts a plan may choose: ``base / 2**k`` down to 1 and ``base * 2**k`` up to ``maximum``."""
    base = max(1, min(base, maximum))
    down = [base >> k for k in range(base.bit_length()) if base >> k >= 1]
    up = [base << k for k in range(1, 32) if base << k <= maximum]
    return sorted(set(down + up))


def plan_slots(
    requests: int,
    base: int,
    kv_per_row: int,
    step_per_row: int,
    free_bytes: int | None,
    previous: int = 0,
    maximum: int = MAX_SLOTS,
) -> SlotPlan:
    """The slot count for a call of ``requests`` requests (see the module's rules).

    ``free_bytes``: free device memory plus what the current slots hold (None: no figure); ``previous``:
    the rows allocated now, kept when larger (grow only; 0 when rows may shrink).
    """
    per_row = max(1, kv_per_row + step_per_row)
    steps = ladder(base, maximum)
    budget: int | None = None
    if free_bytes is None:
        rows, why = base, "no free-memory figure on this device: the spec's batch_size x samples"
    else:
        budget = int(free_bytes * SLOT_MEMORY_SHARE)
        fit = [r for r in steps if r * per_row <= budget] or [1]
        wanted = next((r for r in steps if r >= requests), steps[-1])
        rows = min(wanted, fit[-1])
        why = (
            f"{requests} requests want {wanted} rows; {fit[-1]} fit in {SLOT_MEMORY_SHARE:.0%} of "
            f"{free_bytes / 2**30:.1f} GiB free at {per_row / 2**20:.2f} MiB a row"
        )
    if previous > rows:  # its memory is held already (counted in free_bytes by the caller)
        rows, why = previous, why + f"; keeping the {previous} rows already allocated (grow only)"
    return SlotPlan(rows, base, requests, kv_per_row, step_per_row, budget, why)


def free_device_bytes(device: str) -> int | None:
    """Free memory of a CUDA ``device`` now, or None (CPU, MPS: no figure)."""
    if not device.startswith("cuda"):
        return None
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free)
