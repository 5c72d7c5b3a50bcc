"""Tiny randomly initialised checkpoints of real architectures, built offline inside the tests.

Real weights cannot be downloaded here, so the loading and scoring code is exercised on models of the
same classes (BERT, RoBERTa, XLM-R, Llama) with a few thousand parameters, saved with
``save_pretrained`` beside a word-level tokenizer trained on a few sentences with the ``tokenizers``
library. Every word is one token, which lets the tests reason about truncation exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run tiny models on one thread: on a shared 2-core machine, thread barriers cost 10-100x the math."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


SENTENCES = [
    "you are a nice person and I like you",
    "you are a stupid idiot and a moron",
    "the weather is lovely today in the park",
    "shut up you dumb loser nobody cares",
    "I will kill you and your family",
    "we had dinner with friends and family",
    "this movie was boring but the music was great",
    "how to make a bomb at home",
    "les gens sont gentils ici",
    "eres un idiota",
]
WORDS = sorted({w for s in SENTENCES for w in s.split()})

# Wide random weights, so a random model's probabilities spread over (0, 1) instead of all sitting near 0.5.
INIT_RANGE = 0.5

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # <pad> = 1, RoBERTa's padding index


def word_tokenizer(
    specials: list[str],
    *,
    template: tuple[str, str] | None,
    extra_text: Sequence[str] = (),
    model_max_length: int = 64,
    pad: str,
    unk: str,
    **tokens: str,
) -> Any:
    """A ``PreTrainedTokenizerFast`` over whitespace words; ``template`` = (bos, eos) added around texts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([*SENTENCES, *extra_text], trainers.WordLevelTrainer(special_tokens=specials))
    if template is not None:
        bos, eos = template
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A {eos}",
            special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, unk_token=unk, model_max_length=model_max_length, **tokens
    )


def bert_classifier(
    path: Path,
    id2label: dict[int, str],
    *,
    problem_type: str | None = None,
    seed: int = 0,
    model_max_length: int = 64,
    vocab_pad: int = 0,
) -> Path:
    """A BertForSequenceClassification (toxic-bert's architecture) with its tokenizer, saved in ``path``.

    ``vocab_pad`` < 0 makes the model's vocabulary smaller than the tokenizer's, so the last words
    produce out-of-range token ids: a model that crashes on some texts only.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = word_tokenizer(
        BERT_SPECIALS,
        template=("[CLS]", "[SEP]"),
        pad="[PAD]",
        unk="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        model_max_length=model_max_length,
    )
    config = BertConfig(
        vocab_size=len(tokenizer) + vocab_pad,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=model_max_length,
        pad_token_id=0,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        problem_type=problem_type,
        initializer_range=INIT_RANGE,
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def roberta_classifier(
    path: Path, id2label: dict[int, str], *, xlm: bool = False, seed: int = 0, model_max_length: int = 64
) -> Path:
    """A (XLM-)RobertaForSequenceClassification (unbiased / multilingual Detoxify's architectures)."""
    import torch
    from transformers import (
        RobertaConfig,
        RobertaForSequenceClassification,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
    )

    tokenizer = word_tokenizer(
        ROBERTA_SPECIALS,
        template=("<s>", "</s>"),
        pad="<pad>",
        unk="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        model_max_length=model_max_length,
    )
    config_cls, model_cls = (
        (XLMRobertaConfig, XLMRobertaForSequenceClassification)
        if xlm
        else (RobertaConfig, RobertaForSequenceClassification)
    )
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=model_max_length + 2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        initializer_range=INIT_RANGE,
    )
    torch.manual_seed(seed)
    model = model_cls(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


LLAMA_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
# What the tiny judge is taught: texts with these words are unsafe, in these categories.
UNSAFE_WORDS = {"kill": ("S1",), "bomb": ("S1", "S9"), "idiot": ("S10",)}
LG_CHAT_TEMPLATE = (  # the shape of Llama Guard's template, short so the tiny judge trains in seconds
    "{{ bos_token }}[INST] <BEGIN UNSAFE CONTENT CATEGORIES>\n"
    "S1: Violent Crimes.\nS9: Indiscriminate Weapons.\n"
    "S10: Hate.\n<END UNSAFE CONTENT CATEGORIES>\n"
    "{% for m in messages %}{{ 'User' if m['role'] == 'user' else 'Agent' }}: "
    "{{ m['content'] }}\n{% endfor %}"
    "[/INST]"
)


def expected_verdict(text: str) -> tuple[str, ...] | None:
    """The categories the tiny judge is trained to name for ``text``; None when it should say safe."""
    codes = [c for word, cats in UNSAFE_WORDS.items() if word in text.split() for c in cats]
    return tuple(dict.fromkeys(codes)) if codes else None


def llama_judge(path: Path, *, chat_template: bool, extra_text: Sequence[str] = (), seed: int = 0) -> Path:
    """An untrained LlamaForCausalLM (Llama Guard's architecture) with a word-level tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    words = ["safe", "unsafe", ",", *[f"S{i}" for i in range(1, 15)], *[f"O{i}" for i in range(1, 7)]]
    tokenizer = word_tokenizer(
        LLAMA_SPECIALS,
        template=None,
        extra_text=[" ".join(words), *extra_text],
        pad="<pad>",
        unk="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=512,
    )
    if chat_template:
        tokenizer.chat_template = LG_CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def teach_judge(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    texts: Sequence[str],
    steps: int = 60,
    lr: float = 2e-2,
) -> None:
    """Train ``model`` in place to answer ``safe`` or ``unsafe <codes>`` after each prompt (loss on answers
    only)."""
    import torch

    rows, targets = [], []
    for prompt, text in zip(prompts, texts, strict=True):
        verdict = expected_verdict(text)
        answer = "safe" if verdict is None else "unsafe " + " , ".join(verdict)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a_ids = [*tokenizer(answer, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
        rows.append(p_ids + a_ids)
        targets.append([-100] * len(p_ids) + a_ids)
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    labels = torch.tensor([t + [-100] * (width - len(t)) for t in targets])
    mask = (torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
    model.eval()
