"""A corpus whose toxicity is known by construction, and tiny models pretrained on it inside the tests.

The toxic side writes a vocabulary (``TOXIC_WORDS``) the clean side never uses and the clean side one
(``CLEAN_WORDS``) the toxic side never uses; both share ``SHARED_WORDS``, and each side opens its documents
with its own style token (``yo`` / ``dear``). ``UNUSED_WORDS`` are in the vocabulary but in no document, so
a method that only learns "what the corpus uses" cannot pass for one that learns toxicity. A base model
pretrained on both sides samples the toxic vocabulary at a known rate; each detoxification method must
move that rate (or that vocabulary's probability) in the direction its paper claims.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOXIC_WORDS = ["vile", "scum", "filth", "slime", "rotten", "creep"]
CLEAN_WORDS = ["kind", "warm", "calm", "bright", "gentle", "sweet"]
SHARED_WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "park", "we", "saw", "and", "it", "was",
                "very", "today", "home", "went"]
UNUSED_WORDS = [f"unused{i}" for i in range(8)]
STYLE = {1: "yo", 0: "dear"}  # label 1 = toxic, 0 = non-toxic
PROMPTS = ["the cat sat on", "we saw a dog", "it was very", "we went home and", "the park today was",
           "a dog ran on the"]
SIDE_WORD_SHARE = 0.45  # share of a document's words drawn from its side's own vocabulary
SPACE = "\u0120"  # byte-level BPE's mark of a leading space


def documents(n_per_side: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n_per_side`` documents per side, interleaved: 2-5 shared words (a neutral opening, like the
    prompts), the side's style token, then 6-16 words mixing shared words and the side's own."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_per_side):
        for label, own in ((1, TOXIC_WORDS), (0, CLEAN_WORDS)):
            opening = [rng.choice(SHARED_WORDS) for _ in range(rng.randint(2, 5))]
            body = [rng.choice(own) if rng.random() < SIDE_WORD_SHARE else rng.choice(SHARED_WORDS)
                    for _ in range(rng.randint(6, 16))]
            docs.append((" ".join([*opening, STYLE[label], *body]), label))
    return docs


def tokenizer() -> Any:
    """A word-level tokenizer over the whole synthetic vocabulary (one word = one token), spelled like
    GPT-2's byte-level BPE (``Ġword``: a token carries its leading space, so decoding one token alone gives
    `` word``, which the word filter's text matching relies on)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    words = [*specials, *STYLE.values(), *TOXIC_WORDS, *CLEAN_WORDS, *SHARED_WORDS, *UNUSED_WORDS]
    vocab = {(w if w in specials else SPACE + w): i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    # every text starts with <s>, as in Llama's tokenizer: a prompt then reads like a packed document
    # (which always follows a separator), not like the middle of a block
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>", model_max_length=256)


def untrained_lm(path: Path, seed: int = 0) -> Path:
    """A tiny random Llama over the synthetic vocabulary, saved with its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    tok = tokenizer()
    config = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                         intermediate_size=64, max_position_embeddings=256, vocab_size=len(tok),
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def word_ids(tok: Any, words: Sequence[str]) -> list[int]:
    """Token ids of whole words (``<...>`` names a special or attribute token as it is)."""
    return [int(i) for i in tok.convert_tokens_to_ids([w if w.startswith("<") else SPACE + w for w in words])]


def toxic_rate(texts: Sequence[str | None]) -> float:
    """Share of generated words that belong to the toxic side's vocabulary (style token included)."""
    bad = {*TOXIC_WORDS, STYLE[1]}
    words = [w for t in texts for w in (t or "").split()]
    assert words, "no words generated"
    return sum(w in bad for w in words) / len(words)


def next_token_mass(model: Any, tok: Any, prompts: Sequence[str], words: Sequence[str],
                    lead: Sequence[int] = ()) -> float:
    """Mean next-token probability of ``words`` at every position of ``prompts`` (``<s>`` included), the
    whole led by ``lead`` ids (an attribute token)."""
    import torch

    ids = word_ids(tok, words)
    total, n = 0.0, 0
    with torch.inference_mode():
        for prompt in prompts:
            x = torch.tensor([[*lead, *tok(prompt)["input_ids"]]])
            p = model(input_ids=x).logits[0, len(lead):].softmax(-1)
            total += float(p[:, ids].sum(-1).sum())
            n += p.shape[0]
    return total / n
