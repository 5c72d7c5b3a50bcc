"""``polytox.score``: ``polytox score`` on a list of texts instead of a file.

Texts are checked and their languages read or detected as ``polytox score`` reads the rows of a file
(``scoring.textio.rows_from_texts``), the scorer is built the same way (the score cache unless
``cache=off``, a calibration file, the scale options of ``polytox-ml``) and scored in the same chunks
(``scoring.score_file.score_rows``), so each value equals the ``toxicity`` the command writes for the same
text, and each failure carries the same error. The built scorer is kept between calls (``api.scorers``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PolytoxError
from ..spec import DEFAULT_SCORER
from .scorers import Options, normalise_options, shared_scorer

if TYPE_CHECKING:
    from ..scoring.base import Scorer


@dataclass(frozen=True)
class ScoredText:
    """One text's score: ``value`` is its toxicity (None when it failed), ``error`` why it failed (None when
    it scored). ``values`` holds every attribute the scorer returned (with ``toxicity_raw`` where the scorer
    keeps its uncalibrated value); ``lang`` the language used, ``lang_detected`` whether it was detected."""

    text: Any
    lang: str | None
    value: float | None
    error: str | None
    scorer: str
    lang_detected: bool = False
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the text scored."""
        return self.error is None


def _languages(langs: str | Sequence[str | None] | None, n: int) -> list[str | None]:
    """One language (or None: detect) per text from ``langs``: None, one code for all, or one per text."""
    if langs is None or isinstance(langs, str):
        return [langs] * n
    out = list(langs)
    if len(out) != n:
        raise PolytoxError(
            f"score() got {n} text(s) but {len(out)} language(s); give one language per text, "
            "one code for all, or None to detect them"
        )
    return out


def score(
    texts: Sequence[str],
    scorer: str = DEFAULT_SCORER,
    langs: str | Sequence[str | None] | None = None,
    options: Options | None = None,
    attributes: str | Sequence[str] | None = None,
) -> list[ScoredText]:
    """Score texts with one scorer (``polytox score``), one result per text, in order.

    The scorer is built on the first call with a given ``scorer`` and ``options`` and kept for later calls
    (``api.scorers.shared_scorer``), so a loop pays the model's load once; ``polytox.close_scorers()``
    releases it, ``polytox.scorer(...)`` gives a handle with its own lifetime.

    Args:
        texts: the texts; an empty or non-string one fails alone (``EMPTY_TEXT``, ``BAD_INPUT``), as a row of
            ``polytox score`` would.
        scorer: a registered scorer name (``--scorer``); ``"default"`` routes each text by its language.
        langs: None to detect each text's language (py3langid, PTP's 17 languages), one code for every text,
            or one code (or None) per text.
        options: scorer options, a mapping or ``KEY=VALUE`` strings (``--scorer-opt``): ``cache=off``,
            ``scale=...``, ``text=web``...
        attributes: the attributes to score, for a scorer that takes the ``attributes`` option: ``"rtp"``
            (Perspective's eight), ``"ptp"`` (PTP's six), or names (``["toxicity", "insult"]``); toxicity is
            always scored. The same as ``options={"attributes": ...}``.

    Returns:
        One ``ScoredText`` per text: ``.value`` (toxicity; None on failure), ``.values`` (every attribute
        scored, lower-case keys) and ``.error``.

    Raises:
        PolytoxError: an unknown scorer or option, a bad option value, ``langs`` of the wrong length, with the
            message ``polytox score`` prints.
    """
    _check_texts(texts)
    opts = normalise_options(options)
    if attributes is not None:
        asked = attributes if isinstance(attributes, str) else ",".join(str(a) for a in attributes)
        if "attributes" in opts and opts["attributes"] != asked:
            raise PolytoxError(
                f"score() got attributes={asked!r} and options attributes={opts['attributes']!r}; give one"
            )
        opts["attributes"] = asked
    _languages(langs, len(texts))  # a wrong length fails before anything is built
    return score_with(shared_scorer(scorer, opts), texts, langs)


def _check_texts(texts: object) -> None:
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise PolytoxError(f"score() takes a list of texts, got {type(texts).__name__}")


def score_with(
    built: Scorer, texts: Sequence[str], langs: str | Sequence[str | None] | None = None
) -> list[ScoredText]:
    """Score ``texts`` with an already built scorer, as ``polytox score`` scores the rows of a file."""
    from ..scoring.score_file import score_rows
    from ..scoring.textio import rows_from_texts

    _check_texts(texts)
    rows = rows_from_texts(list(texts), _languages(langs, len(texts)))
    scores = score_rows(built, rows)
    return [
        ScoredText(
            text=t,
            lang=r.lang,
            value=s.get("toxicity"),
            error=s.error,
            scorer=built.id,
            lang_detected=r.lang_detected,
            values=dict(s.values or {}),
        )
        for t, r, s in zip(texts, rows, scores, strict=True)
    ]
