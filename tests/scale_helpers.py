"""Helpers for the scale tests: a tiny real tokenizer (built offline) and a stand-in for ``vllm.LLM``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

WORDS = ["<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "boom",
         "the", "cat", "sat", "on", "a", "mat", "hello", "world", "you", "are", "an", "idiot", "and", "dog",
         "ran", "far", "away", "from", "home", "today"]
CHAT_TEMPLATE = ("{% for m in messages %}<|user|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def tiny_tokenizer(chat: bool = False, bos: bool = True) -> Any:
    """A word-level fast tokenizer over ``WORDS``; optional chat template; with or without a BOS token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()
    kwargs = {"bos_token": "<s>"} if bos else {}
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", **kwargs)
    if chat:
        hf.chat_template = CHAT_TEMPLATE
    return hf


@dataclass
class StandInSamplingParams:
    """Records what the backend asked vLLM for."""

    n: int = 1
    seed: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16


@dataclass
class _Completion:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class _RequestOutput:
    outputs: list[_Completion]


@dataclass
class StandInLLM:
    """Mimics ``vllm.LLM``: constructor kwargs, ``get_tokenizer``, ``llm_engine.model_config.max_model_len``
    and ``generate`` (token ids drawn from a RNG seeded by the request seed and output index)."""

    model: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[list[dict[str, Any]], list[StandInSamplingParams]]] = field(default_factory=list)
    tokenizer: Any = None
    engine_max_len: int = 12

    @classmethod
    def factory(cls, tokenizer: Any, engine_max_len: int = 12) -> Any:
        made: list[StandInLLM] = []

        def build(**kwargs: Any) -> StandInLLM:
            llm = cls(model=kwargs["model"], kwargs=kwargs, tokenizer=tokenizer,
                      engine_max_len=engine_max_len)
            made.append(llm)
            return llm

        build.made = made  # type: ignore[attr-defined]
        return build

    @property
    def llm_engine(self) -> Any:
        class Cfg:
            max_model_len = self.engine_max_len

        class Engine:
            model_config = Cfg()

        return Engine()

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def generate(self, prompts: list[dict[str, Any]], params: list[StandInSamplingParams],
                 use_tqdm: bool = False) -> list[_RequestOutput]:
        self.calls.append((prompts, params))
        boom = WORDS.index("boom")
        if any(boom in p["prompt_token_ids"] for p in prompts):
            raise ValueError("stand-in vLLM refuses the token 'boom'")
        out = []
        for _p, sp in zip(prompts, params, strict=True):
            comps = []
            for j in range(sp.n):
                rng = np.random.default_rng([sp.seed or 0, j])
                ids = [int(x) for x in rng.integers(6, len(WORDS), size=sp.max_tokens)]
                comps.append(_Completion(j, " " + self.tokenizer.decode(ids), ids, "length"))
            out.append(_RequestOutput(list(reversed(comps))))  # vLLM does not promise index order
        return out
