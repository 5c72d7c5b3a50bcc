"""Word filter (RTP §5.2): never complete a word of a blocklist, whatever tokens spell it.

RTP sets "the probability of generating any word from a list of profanity, slurs, and swearwords to
zero". A banned word can be spelled by many token sequences (" fuck", " f"+"uck", "F"+"UCK"...), so this
filter does not ban a fixed set of token sequences: it works on text. At each step it decodes the tail of
the row's history and sets to -inf every token that would *complete* a listed term as a whole word:

- word-boundary aware: a term must start at a word start ("class" never blocks "ass"). At its end, a
  token that ends exactly on a term (" ass", the next character still unknown) is banned by default
  (``end=eager``: the model cannot write the term and then grow it into "assX..."). With ``end=exact``
  such a token is allowed and the next step bans every token that would close the word there (space,
  punctuation, EOS), so only a longer word ("assistant") can follow; on the last step it is banned
  outright, since nothing can follow it. Tokens that close the word inside themselves (" ass,") are
  banned in both modes;
- multi-token: the term may start in earlier tokens (the history) and end in this one;
- case-insensitive (case-folded), phrases with spaces ("blue waffle") included.

On the vLLM backend the same list becomes banned token sequences (``detox/vllm_map.py``).
"""

from __future__ import annotations

import bisect
import hashlib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from .base import LogitsAdjuster
from .wordlists import default_list, read_list

TAIL_TOKENS = 16  # history tokens decoded per step: enough for any listed term plus its left boundary


def is_word_char(ch: str) -> bool:
    """Letters, digits, underscore and combining marks continue a word; anything else is a boundary."""
    return ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M")


def _lead(text: str) -> tuple[str, bool]:
    """A token text's leading run of word characters, and whether a boundary character follows it."""
    m = 0
    while m < len(text) and is_word_char(text[m]):
        m += 1
    return text[:m], m < len(text)


class Blocklist:
    """A term list compiled against one tokenizer's vocabulary."""

    def __init__(self, terms: Iterable[str], token_texts: Sequence[str], eos_ids: Iterable[int]) -> None:
        self.terms = sorted({t.casefold() for t in terms if t})
        self.texts = [t.casefold() for t in token_texts]
        self.vocab = len(self.texts)
        self.eos = sorted(set(eos_ids))
        self.words = {t for t in self.terms if all(is_word_char(c) for c in t)}
        self.phrases = [t for t in self.terms if t not in self.words]
        # prefix of a single-word term -> the remainders that complete it
        self.remainders: dict[str, list[str]] = {}
        for w in self.words:
            for k in range(len(w) + 1):
                self.remainders.setdefault(w[:k], []).append(w[k:])
        # leading word run of each token -> ids followed by a boundary inside the token / ids that end there
        self.lead_closed: dict[str, list[int]] = {}
        self.lead_open: dict[str, list[int]] = {}
        self.inside_closed: list[int] = []  # a whole term at a word start inside the token, closed inside it
        self.inside_open: list[int] = []  # ... reaching the token's end (complete unless a word char follows)
        for i, text in enumerate(self.texts):
            if not text:
                continue
            run, closed = _lead(text)
            (self.lead_closed if closed else self.lead_open).setdefault(run, []).append(i)
            self._scan_inside(i, text)
        self.sorted_texts = sorted((t, i) for i, t in enumerate(self.texts) if t)
        self.sorted_keys = [t for t, _ in self.sorted_texts]

    def _scan_inside(self, i: int, text: str) -> None:
        """Record token ``i`` if a term starts at a word start after its first character."""
        for p in range(1, len(text)):
            if is_word_char(text[p]) and not is_word_char(text[p - 1]):
                run, closed = _lead(text[p:])
                if run in self.words:
                    (self.inside_closed if closed else self.inside_open).append(i)
                    return
        for phrase in self.phrases:
            start = text.find(phrase, 1)
            while start > 0:
                end = start + len(phrase)
                if not is_word_char(text[start - 1]) or not is_word_char(phrase[0]):
                    if end == len(text):
                        self.inside_open.append(i)
                        return
                    if not (is_word_char(text[end]) and is_word_char(phrase[-1])):
                        self.inside_closed.append(i)
                        return
                start = text.find(phrase, start + 1)

    def _starting_with(self, r: str, last: bool) -> list[int]:
        """Tokens whose text is ``r`` followed by a boundary (or ends right after ``r`` when ``last``)."""
        lo = bisect.bisect_left(self.sorted_keys, r)
        out = []
        for t, i in self.sorted_texts[lo:]:
            if not t.startswith(r):
                break
            if len(t) == len(r):
                if last:
                    out.append(i)
            elif not (is_word_char(t[len(r)]) and (not r or is_word_char(r[-1]))):
                out.append(i)
        return out

    def _closing(self, remainder: str, last: bool) -> list[int]:
        """Tokens that complete a single-word term whose remaining characters are ``remainder``."""
        if remainder == "":  # the term is already written: ban whatever would end the word here
            return self.lead_closed.get("", []) + self.eos + (self.lead_open.get("", []) if last else [])
        ids = list(self.lead_closed.get(remainder, []))
        if last:
            ids += self.lead_open.get(remainder, [])
        return ids

    def banned(self, tail: str, last: bool, eager: bool = True) -> list[int]:
        """Token ids that would complete a term after the (decoded, case-folded) history ``tail``.

        ``last`` or ``eager``: a token that ends exactly on a term counts as completing it. With ``eager``
        a generated token never ends on a term, so a term already whole in ``tail`` came from the prompt
        and is not the continuation's doing: nothing is banned for it.
        """
        last = last or eager
        ids = list(self.inside_closed)
        if last:
            ids += self.inside_open
        k = len(tail)
        while k > 0 and is_word_char(tail[k - 1]):
            k -= 1
        run = tail[k:]  # the word being written (empty at a word start)
        for remainder in self.remainders.get(run, []):
            if remainder or not eager:
                ids += self._closing(remainder, last)
        for phrase in self.phrases:
            for j in range(0, len(phrase) + 1):
                head = phrase[:j]
                if not tail.endswith(head):
                    continue
                before = len(tail) - j
                if before > 0 and is_word_char(tail[before - 1]) and is_word_char(phrase[0]):
                    continue  # not at a word start
                rest = phrase[j:]
                if rest:
                    ids += self._starting_with(rest, last)
                elif not eager:
                    ids += self._closing("", last)
        return ids


class WordFilter(LogitsAdjuster):
    """``--detox word-filter[:list=PATH,end=eager|exact]``: -inf on every token completing a listed word."""

    name = "word-filter"

    def __init__(self, generator: Any, options: dict[str, Any]) -> None:
        self.source = options["list"] or default_list()
        self.end = options["end"]  # eager | exact (``methods.METHODS`` checked it)
        terms = read_list(self.source)
        self.tokenizer = generator.tokenizer
        self.blocklist = compile_blocklist(terms, self.tokenizer, generator.eos_ids)

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        import torch

        mask = torch.zeros(logits.shape, dtype=torch.bool)
        for row, history in enumerate(histories):
            tail = self.tokenizer.decode(list(history[-TAIL_TOKENS:]), skip_special_tokens=True).casefold()
            ids = [i for i in self.blocklist.banned(tail, last, self.end == "eager") if i < logits.shape[-1]]
            if ids and len(set(ids)) < logits.shape[-1]:  # never leave a row with nothing to sample
                mask[row, ids] = True
        return logits.masked_fill(mask.to(logits.device), float("-inf"))

    def describe(self) -> dict[str, Any]:
        digest = hashlib.sha256("\n".join(self.blocklist.terms).encode()).hexdigest()[:16]
        return {
            "method": self.name,
            "list": self.source,
            "end": self.end,
            "terms": len(self.blocklist.terms),
            "terms_sha256": digest,
        }


def token_texts(tokenizer: Any) -> list[str]:
    """The text each vocabulary id decodes to on its own ("" for special tokens)."""
    size = max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
    return list(tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=True))


def compile_blocklist(terms: Iterable[str], tokenizer: Any, eos_ids: Iterable[int]) -> Blocklist:
    return Blocklist(terms, token_texts(tokenizer), eos_ids)
