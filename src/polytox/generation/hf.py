"""Local generation with Hugging Face transformers: prefill once, sample K continuations from it.

The naive pattern (one ``generate(num_return_sequences=K)`` call per prompt) runs every prompt K times
through the model and decodes a batch of K rows. This backend instead

1. orders a shard's prompts longest first and prefills each prompt ONCE (left-padded batches), keeping
   only the last position's logits;
2. copies that prefill into one KV-cache slot per requested sample (``slots.py``): each slot has its own
   write column, so a slot whose sample ended (EOS or ``max_new_tokens``) is refilled with the next
   waiting sample at once (continuous batching, ``continuous.py``), and a step reads only the filled
   columns, with grouped-query attention on the stored key/value heads (no head repetition);
3. samples every row on the device from its own seeded uniforms (``sampling.py``), so results do not
   depend on batch neighbours, on refills, or on where a killed run resumed; the host reads the device
   back only every ``check_every`` steps (to find EOS rows), and on CUDA the decode step is captured as
   CUDA graphs or compiled (``compile`` option, ``decode_plan.py``), over a few bucketed shapes.

Architectures whose cache is not a plain full-attention cache (sliding-window layers such as Gemma 3's)
use the lock-step loop: one left-padded batch per ``batch_size`` prompts, the model's own cache,
finished rows dropped from the batch as they accumulate.

Model options (``--model-opt KEY=VALUE``): ``TransformersGenerator.OPTIONS`` (types, ranges, defaults;
``polytox scorers --options generators`` lists them). ``compile``: ``decode_plan.py`` (auto = CUDA graphs of
the eager step on CUDA, torch.compile only where the run pays it back, eager elsewhere); ``slots``: ``auto``
= from the call's requests and the free GPU memory, ``slot_plan.py``; ``sampler`` and ``sampler_fallback``:
``sampling.py``; ``attention``: ``auto`` = per decode shape from a measured table, ``attention_plan.py``.

Prompts are raw text for base models; for instruct/chat models (a chat template is present) the prompt
is the single user message rendered with the model's chat template, as PTP did. A prompt longer than the
context is truncated from the left and flagged. An empty prompt (unprompted generation, RTP §3.1) starts
from the BOS token alone.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .._util import ranges as R
from .._util.onednn import restore_linears, use_onednn_linears
from .._util.options import Option, with_defaults
from .._util.torch_device import pick_device, pick_dtype
from ..errors import PolytoxError, require
from ..models import resolve_model
from ..spec import GenerationSpec
from ..types import Generation, GenerationRequest, Prompt
from . import attention_plan
from .base import Generator, failed
from .continuous import DecodeSettings, decode, decode_capacity, worth_compacting
from .cuda_graphs import GraphedStep
from .decode_plan import CUDA_READ_FLOOR, DecodeChoice, initial_choice, should_compile
from .hf_cache import cache_kw, cache_of
from .hooks import check_decoding, decoding_hook
from .prompting import PromptTooLongError, encode_prompt, wants_chat_template
from .sampling import FALLBACKS, METHODS, resolve_fallback, resolve_method, row_uniforms, sample_next
from .slot_plan import STEP_BYTES_PER_VOCAB, SlotPlan, free_device_bytes, kv_bytes_per_row, plan_slots
from .slots import ATTENTION_ATTR, SlotCache, register_attention

log = logging.getLogger("polytox")


def select_rows(cache: Any, index: Any) -> None:
    """Keep (or repeat) batch rows ``index`` of a KV cache, in place."""
    from transformers.cache_utils import StaticLayer

    layers = getattr(cache, "layers", None)
    if layers and all(type(layer) is StaticLayer for layer in layers):
        for layer in layers:
            layer.keys = layer.keys[index]
            layer.values = layer.values[index]
            layer.batch_size = len(index)
    else:
        cache.batch_select_indices(index)


class TransformersGenerator(Generator):
    """Generation backend over any ``AutoModelForCausalLM``."""

    name = "transformers"
    OPTIONS: ClassVar[Mapping[str, Option]] = {
        "continuous": Option("bool", default=True, help="continuous batching in decode slots"),
        "check_every": Option("int", range=R.AT_LEAST_ONE, help="steps between EOS read-backs (1 on CPU, 8 on GPU)"),
        "min_admit": Option("int", range=R.COUNT, default=0, help="free slots that trigger a refill (0: K)"),
        "compile": Option(
            choices=("auto", "false", "true", "graphs", "inductor", "eager"),
            default="auto",
            help="decode step: eager, CUDA graphs or torch.compile (decode_plan.py)",
        ),
        "compile_backend": Option("str", default="inductor", help="torch.compile backend"),
        "read_bucket": Option("int", range=R.COUNT, help="smallest bucketed read length (64 on CUDA, 0: exact)"),
        "static_cache": Option("bool", default=True, help="static KV cache (lock-step loop only)"),
        "slots": Option("int", words=("auto",), range=R.COUNT, default="auto", help="rows per decode step"),
        "sampler": Option(choices=METHODS, default="auto", help="how a top-p nucleus is found (same tokens)"),
        "sampler_fallback": Option(choices=FALLBACKS, default="auto", help="which rows the candidates sort"),
        "attention": Option(choices=attention_plan.KERNELS, default="auto", help="decode attention's SDPA kernel"),
    }

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:
        """Options, the detox method's, then the model name (``polytox.models.lookup``): a wrong name fails
        before any work."""
        super().check(spec)
        check_decoding(spec)
        from ..models.lookup import check_model

        check_model(spec.model)

    def __init__(self, spec: GenerationSpec) -> None:
        self.torch = require("torch", "hf")
        transformers = require("transformers", "hf")
        transformers.utils.logging.disable_progress_bar()
        self.spec = spec
        started = time.perf_counter()
        path, instruct = resolve_model(spec.model)
        self.device = pick_device(spec.device)
        self.dtype = pick_dtype(spec.dtype, self.device, cpu_bf16=False)  # sampled tokens never depend on the CPU
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype)
        self.model.to(self.device).eval()
        # float32 on CPU: oneDNN's linear kernel (MKL's sgemm takes its AVX2 path on AMD CPUs; _util/onednn.py)
        on_cpu_fp32 = self.device == "cpu" and self.dtype == self.torch.float32
        self.onednn_linears = use_onednn_linears(self.model) if on_cpu_fp32 else 0
        self.load_seconds = time.perf_counter() - started
        config = self.model.config
        self.context = int(
            getattr(config, "max_position_embeddings", None)
            or getattr(config, "n_positions", 0)
            or self.tokenizer.model_max_length
        )
        if spec.max_new_tokens >= self.context:
            raise PolytoxError(
                f"max_new_tokens={spec.max_new_tokens} leaves no room for a prompt in the "
                f"model's context of {self.context} tokens"
            )
        self.use_chat = wants_chat_template(spec.chat_template, self.tokenizer)
        self.eos_ids = self._eos_ids()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_ids[0] if self.eos_ids else 0
        self.instruct = instruct
        # decoding-time detoxification (registered by polytox.detox), None without --detox
        self.detox = decoding_hook(spec, self)
        options = with_defaults(f"backend {self.name!r}", self.OPTIONS, dict(spec.options), flag="--model-opt")
        self.static_cache = bool(options["static_cache"])
        on_gpu = self.device.startswith("cuda")
        self.continuous = bool(options["continuous"]) and self.detox is None and self._plain_cache()
        self.check_every = int(options["check_every"] or (8 if on_gpu else 1))
        self.min_admit = int(options["min_admit"])
        self.choice = initial_choice(str(options["compile"]), self.device)
        floor = CUDA_READ_FLOOR if on_gpu or self.choice.mode != "eager" else 0
        self.read_floor = floor if options["read_bucket"] is None else int(options["read_bucket"])
        self.compile_backend = str(options["compile_backend"])
        self.slots_option = options["slots"]
        self.sampler = str(options["sampler"])  # one of the row's choices: checked with the options, before any work
        self.fallback = resolve_fallback(str(options["sampler_fallback"]), self.device.split(":")[0])
        self.fallback_overflows = 0
        self.slot_plan: SlotPlan | None = None
        if self.continuous and getattr(self.model.config, "_attn_implementation", None) == "sdpa":
            self.model.set_attn_implementation(register_attention())
        self.attention = str(options["attention"])
        if self.attention != "auto":
            for module in self.model.modules():  # read by ``slots.decode_attention``
                setattr(module, ATTENTION_ATTR, self.attention)
        self._step: Any = None
        self._slot_cache: SlotCache | None = None
        self.compile_error: str | None = None
        self.planned_requests: int | None = None
        self.decoded = {"tokens": 0, "seconds": 0.0, "requests": 0}
        self.shapes: set[tuple[int, int]] = set()
        if not self.continuous:
            self.choice = DecodeChoice(
                "eager",
                "lock-step loop (continuous=false or a cache the slots do not support): no compiled step",
                self.choice.requested,
            )
        self._set_mode(self.choice.mode)

    def _set_mode(self, mode: str) -> None:
        """Build the decode step for ``mode`` (eager | graphs | inductor)."""
        self.choice.mode = mode
        if mode == "graphs":
            self._step = GraphedStep(self.model)
        elif mode == "inductor":
            if self.onednn_linears:  # dynamo cannot trace oneDNN's linear op: the compiled step takes torch's path
                restore_linears(self.model)
                self.onednn_linears = 0
            dynamo = self.torch._dynamo.config  # one graph per (rows, read-length bucket); a few at most
            dynamo.cache_size_limit = max(int(dynamo.cache_size_limit), 64)
            on_gpu = self.device.startswith("cuda")
            self._step = self.torch.compile(
                self.model,
                backend=self.compile_backend,
                dynamic=False,
                **({"mode": "reduce-overhead"} if on_gpu else {}),
            )
        else:
            self._step = None

    def plan_run(self, requests: int) -> None:
        """Told by the executor how many samples this run still has to generate (``compile=auto`` uses it)."""
        self.planned_requests = int(requests)

    def _after_call(self, tokens: int, seconds: float, requests: int) -> None:
        """Account a decode call; under ``compile=auto``, compile once the rest of the run pays for it."""
        self.decoded["tokens"] += tokens
        self.decoded["seconds"] += seconds
        self.decoded["requests"] += requests
        if self.choice.requested != "auto" or self.choice.mode != "graphs" or self.planned_requests is None:
            return
        per_request = self.decoded["tokens"] / max(1, self.decoded["requests"])
        remaining = int(max(0, self.planned_requests - self.decoded["requests"]) * per_request)
        rate = self.decoded["tokens"] / max(1e-9, self.decoded["seconds"])
        if remaining <= 0:  # keep the reason of the last decision that had something to decide
            return
        compile_now, why = should_compile(remaining, rate, len(self.shapes))
        self.choice.reason = why
        if compile_now:
            log.info("compile=auto: %s", why)
            self._set_mode("inductor")

    def _get_cache(self, n_layers: int, rows: int, capacity: int) -> SlotCache:
        """The generator's slot cache, reused while it fits (compiled and captured steps keep their buffers)."""
        cache = self._slot_cache
        if cache is None or not cache.fits(rows, capacity):
            if cache is not None and cache.rows == rows:
                capacity = max(capacity, cache.capacity)  # grow only: few reallocations
            self._slot_cache = None
            cache = self._slot_cache = SlotCache(n_layers, rows, capacity, self.device)
        return cache

    def _plan_slots(self, prompts: list[list[int]], requests: int, base: int, fixed: bool) -> int:
        """Rows of this decode call (``slot_plan.py``): ``slots=N`` as given, ``auto`` from the run and memory."""
        if self.slots_option != "auto":
            return max(1, int(self.slots_option))
        capacity = decode_capacity(prompts, self.spec.max_new_tokens, self.read_floor)
        held = self._slot_cache.nbytes() if self._slot_cache is not None else 0
        free = free_device_bytes(self.device)
        dtype_bytes = self.torch.empty((), dtype=self.dtype).element_size()
        vocab = int(self.model.config.vocab_size)
        plan = plan_slots(
            requests,
            base,
            kv_bytes_per_row(self.model.config, capacity, dtype_bytes),
            vocab * STEP_BYTES_PER_VOCAB,
            None if free is None else free + held,
            previous=self._slot_cache.rows if fixed and self._slot_cache else 0,
        )
        if self._slot_cache is not None and self._slot_cache.rows == plan.rows:  # reused: it keeps its capacity
            wider = max(capacity, self._slot_cache.capacity)
            plan.kv_bytes_per_row = kv_bytes_per_row(self.model.config, wider, dtype_bytes)
        self.slot_plan = plan
        return plan.rows

    def _plain_cache(self) -> bool:
        """Whether every layer is plain full attention (no sliding window): slots need that."""
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        try:
            cache = StaticCache(config=self.model.config, max_cache_len=8)
        except Exception:  # an architecture StaticCache does not know: keep the lock-step loop
            return False
        return bool(cache.layers) and all(type(layer) is StaticLayer for layer in cache.layers)

    def _eos_ids(self) -> list[int]:
        ids: set[int] = set()
        gen_cfg = getattr(self.model, "generation_config", None)
        for value in (getattr(gen_cfg, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(int(v) for v in value)
        return sorted(ids)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.spec.model,
            "device": self.device,
            "dtype": str(self.dtype),
            "linear_kernel": "onednn" if self.onednn_linears else "torch",
            "chat_template": self.use_chat,
            "context": self.context,
            "eos_ids": self.eos_ids,
            "model_class": type(self.model).__name__,
            "load_seconds": round(self.load_seconds, 3),
            "continuous_batching": self.continuous,
            "compiled_decode": self._step is not None,
            "decode_mode": self.choice.mode,
            "decode_mode_reason": self.choice.reason,
            "compile_option": self.choice.requested,
            "read_bucket_floor": self.read_floor,
            "decode_shapes": len(self.shapes),
            "planned_requests": self.planned_requests,
            "sampler": resolve_method(self.sampler, self.device.split(":")[0]),
            "sampler_fallback": self.fallback,
            "sampler_fallback_overflows": self.fallback_overflows,
            **attention_plan.manifest(self.shapes, self.device.split(":")[0], self.attention),
            **({"slot_plan": self.slot_plan.manifest()} if self.slot_plan else {}),
            **(
                {"graph_captures": self._step.captures, "graph_capture_seconds": round(self._step.capture_seconds, 3)}
                if isinstance(self._step, GraphedStep)
                else {}
            ),
            **({"compile_error": self.compile_error} if self.compile_error else {}),
        }

    # ---- prompt encoding ------------------------------------------------------------------------
    def encode(self, prompt: Prompt) -> tuple[list[int], bool]:
        """Token ids of the formatted prompt (left-truncated to fit) and whether it was truncated.

        The rules are shared with the vLLM backend (``prompting.py``): BOS alone for an empty prompt,
        the chat template for instruct models, left truncation that keeps the template's own tokens.
        """
        encoded = encode_prompt(
            self.tokenizer, prompt.text, chat=self.use_chat, max_prompt_tokens=self.context - self.spec.max_new_tokens
        )
        if self.detox is not None:  # detox hook: e.g. ATCON prepends its <|nontoxic|> token
            return self.detox.prefix(encoded.ids), encoded.truncated
        return encoded.ids, encoded.truncated

    # ---- generation -----------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        groups: dict[str, list[GenerationRequest]] = {}
        for request in requests:
            groups.setdefault(request.prompt.id, []).append(request)
        results: dict[tuple[str, int], Generation] = {}
        encoded: dict[str, tuple[list[int], bool]] = {}
        for pid, reqs in list(groups.items()):
            try:
                encoded[pid] = self.encode(reqs[0].prompt)
            except PromptTooLongError as exc:  # recorded per sample; the rest of the shard goes on
                for r in groups.pop(pid):
                    results[(pid, r.sample_index)] = failed(r, f"PROMPT_TOO_LONG: {exc}")
        # Longest first within the shard: similar lengths share a batch (less padding); ties keep order.
        order = sorted(groups, key=lambda pid: -len(encoded[pid][0]))
        size = max(1, self.spec.batch_size or self.default_batch_size(self.spec.samples))
        if self.continuous and len(order) > size:
            try:  # the whole shard through the slots; on failure, batch by batch so errors stay local
                outs = self._generate_continuous([encoded[pid] for pid in order], [groups[pid] for pid in order])
            except Exception:  # retried below, batch by batch, where errors are recorded per request
                pass
            else:
                for g in outs:
                    results[(g.prompt_id, g.sample_index)] = g
                return [results[(r.prompt.id, r.sample_index)] for r in requests]
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            try:
                run = self._generate_continuous if self.continuous else self._generate_batch
                outs = run([encoded[pid] for pid in batch], [groups[pid] for pid in batch])
            except Exception as exc:  # e.g. out of memory: this batch becomes recorded errors
                outs = [
                    failed(r, f"GENERATION_FAILED: {type(exc).__name__}: {exc}") for pid in batch for r in groups[pid]
                ]
            for g in outs:
                results[(g.prompt_id, g.sample_index)] = g
        return [results[(r.prompt.id, r.sample_index)] for r in requests]

    def _generate_continuous(
        self, encoded: list[tuple[list[int], bool]], groups: list[list[GenerationRequest]]
    ) -> list[Generation]:
        spec = self.spec
        size = max(1, spec.batch_size or self.default_batch_size(spec.samples))
        fixed = self.choice.mode != "eager"
        requests = [r for g in groups for r in g]
        rows = [i for i, g in enumerate(groups) for _ in g]
        prompts = [ids for ids, _ in encoded]
        slots = self._plan_slots(prompts, len(requests), size * max(1, spec.samples), fixed)
        settings = DecodeSettings(
            max_new_tokens=spec.max_new_tokens,
            temperature=spec.temperature,
            top_p=spec.top_p,
            top_k=spec.top_k,
            slots=slots,
            prefill_batch=size,
            check_every=self.check_every,
            min_admit=self.min_admit or max(1, min(spec.samples, slots // 4)),
            read_floor=self.read_floor,
            fixed_rows=fixed,
            sampler=self.sampler,
            fallback=self.fallback,
        )
        seeds = [r.seed for r in requests]
        started = time.perf_counter()
        with self.torch.inference_mode():
            try:
                result = decode(
                    self.model,
                    prompts,
                    rows,
                    seeds,
                    settings,
                    self.eos_ids,
                    self.pad_id,
                    self.device,
                    forward=self._step,
                    get_cache=self._get_cache,
                )
            except Exception as exc:
                if self._step is None:
                    raise
                # A model the compiler or graph capture cannot handle: decode eagerly from now on, and say so.
                self.compile_error = f"{self.choice.mode}: {type(exc).__name__}: {exc}"[:500]
                self.choice.reason = f"{self.choice.mode} failed, decoding eagerly"
                self._set_mode("eager")
                self._slot_cache = None
                log.warning("the decode step failed (%s); decoding eagerly", self.compile_error)
                settings = dataclasses.replace(settings, fixed_rows=False)
                result = decode(
                    self.model,
                    prompts,
                    rows,
                    seeds,
                    settings,
                    self.eos_ids,
                    self.pad_id,
                    self.device,
                    get_cache=self._get_cache,
                )
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()
        self.shapes.update(result.stats["step_shapes"])
        if result.stats.get("fallback_overflow"):  # nuclei wider than the budget: the host decides from now on
            self.fallback_overflows += 1
            self.fallback = "host"
        self._after_call(sum(len(t) for t in result.tokens), time.perf_counter() - started, len(requests))
        outs = []
        for request, row, tokens, stopped in zip(requests, rows, result.tokens, result.stopped, strict=True):
            outs.append(
                Generation(
                    prompt_id=request.prompt.id,
                    sample_index=request.sample_index,
                    text=self.tokenizer.decode(tokens, skip_special_tokens=True),
                    finish_reason="stop" if stopped else "length",
                    n_tokens=len(tokens),
                    prompt_truncated=encoded[row][1],
                )
            )
        return outs

    def _generate_batch(
        self, encoded: list[tuple[list[int], bool]], groups: list[list[GenerationRequest]]
    ) -> list[Generation]:
        if self.detox is not None and self.detox.owns_decoding:  # detox hook: PPLM runs its own loop
            return self.detox.generate_batch(self, encoded, groups)
        torch = self.torch
        spec = self.spec
        device = self.device
        lengths = [len(ids) for ids, _ in encoded]
        width = max(lengths)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for i, (ids, _) in enumerate(encoded):
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            mask[i, width - len(ids) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)
        counts = torch.tensor([len(g) for g in groups])
        rows = torch.repeat_interleave(torch.arange(len(encoded)), counts)
        requests = [r for g in groups for r in g]
        uniforms = torch.from_numpy(row_uniforms([r.seed for r in requests], spec.max_new_tokens)).float().to(device)

        with torch.inference_mode():
            cache = self._new_cache(width + spec.max_new_tokens)
            out = self.model(
                input_ids=input_ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                **cache_kw(cache),
                use_cache=True,
                logits_to_keep=1,
                cache_position=torch.arange(width, device=device),
            )
            cache = cache_of(out)
            select_rows(cache, rows.to(device))  # each sample shares its prompt's prefill
            logits = out.logits[:, -1, :][rows.to(device)]
            mask = mask[rows].to(device)
            next_pos = torch.tensor([lengths[i] for i in rows.tolist()], device=device)
            n_rows = len(requests)
            active = torch.arange(n_rows, device=device)  # original row index of each live row
            tokens: list[list[int]] = [[] for _ in range(n_rows)]
            finished = [False] * n_rows
            eos = torch.tensor(self.eos_ids or [-1], device=device)
            alive = torch.ones(n_rows, dtype=torch.bool)  # per live row: still decoding
            for step in range(spec.max_new_tokens):
                if self.detox is not None:  # --- detox hook: adjust next-token logits (polytox.detox) ---
                    logits = self.detox.adjust(
                        logits,
                        [encoded[int(rows[r])][0] + tokens[r] for r in active.tolist()],
                        last=step == spec.max_new_tokens - 1,
                    )
                nxt = sample_next(logits, uniforms[active, step], spec.temperature, spec.top_p, spec.top_k)
                is_eos = torch.isin(nxt, eos).cpu()
                for row, tok, stop, live in zip(
                    active.tolist(), nxt.tolist(), is_eos.tolist(), alive.tolist(), strict=True
                ):
                    if not live:
                        continue
                    if stop:
                        finished[row] = True
                    else:
                        tokens[row].append(tok)
                alive &= ~is_eos
                if step == spec.max_new_tokens - 1 or not bool(alive.any()):
                    break
                if worth_compacting(int((~alive).sum()), len(alive)):
                    # Drop finished rows (one cache copy) once enough of them would otherwise waste compute.
                    keep = alive.nonzero().squeeze(1)
                    keep_dev = keep.to(device)
                    select_rows(cache, keep_dev)
                    mask, next_pos = mask[keep_dev], next_pos[keep_dev]
                    active, nxt, alive = active[keep_dev], nxt[keep_dev], alive[keep]
                mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=device)], dim=1)
                out = self.model(
                    input_ids=nxt.view(-1, 1),
                    attention_mask=mask,
                    position_ids=next_pos.view(-1, 1),
                    **cache_kw(cache),
                    use_cache=True,
                    cache_position=torch.tensor([width + step], device=device),
                )
                cache = cache_of(out)
                logits = out.logits[:, -1, :]
                next_pos = next_pos + 1

        results = []
        for row, request in enumerate(requests):
            prompt_index = int(rows[row])
            text = self.tokenizer.decode(tokens[row], skip_special_tokens=True)
            results.append(
                Generation(
                    prompt_id=request.prompt.id,
                    sample_index=request.sample_index,
                    text=text,
                    finish_reason="stop" if finished[row] else "length",
                    n_tokens=len(tokens[row]),
                    prompt_truncated=encoded[prompt_index][1],
                )
            )
        return results

    def _new_cache(self, max_len: int) -> Any:
        """A preallocated KV cache (in-place writes; a growing cache re-copies itself every step), or None
        (the model's own dynamic cache) for architectures with sliding-window or other special layers."""
        if not self.static_cache:
            return None
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        cache = StaticCache(config=self.model.config, max_cache_len=max_len)
        if not all(type(layer) is StaticLayer for layer in cache.layers):
            self.static_cache = False
            return None
        return cache

    def close(self) -> None:
        self._slot_cache = None
        self._step = None
        self.model = None
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()
