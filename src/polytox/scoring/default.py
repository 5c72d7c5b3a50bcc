"""``default``: the scorer ``polytox eval`` and ``polytox score`` use when none is named.

It routes each text by its language to the best offline scorer measured for that language
(docs/default-scorer.md): ``polytox-ml`` for PTP's 17 languages, unless the table below names another.
``polytox-ml`` returns a calibrated probability on Perspective TOXICITY's scale (isotonic maps fitted on
web text and model continuations; human rater shares for the other languages), so EMT / EP / AT computed
with ``default`` are on Perspective's scale; ``polytox scorers`` prints the measured agreement.
Its ``languages`` are the union of the routes, so the runner's language check and the demo's language
selection work as for any scorer; its version names every route's scorer id, so the score cache never
mixes scores of different routings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .._util.options import Option
from ..errors import BadValueError
from ..langs import PTP_LANGUAGES
from ..registry import resolve
from ..types import RAW_KEY, Score
from .base import Scorer, config_digest
from .ml.scorer import PolytoxMlScorer

# Measured choice (docs/default-scorer.md, "Per-language AUC against human ratings"): the scorer with the
# best grouped-CV AUC against RTP-LX human labels among the offline ones that cover the language.
DEFAULT_ROUTES: Mapping[str, str] = dict.fromkeys(PTP_LANGUAGES, "polytox-ml")


class DefaultScorer(Scorer):
    """Options: ``routes`` (``lang=scorer,...`` overrides, e.g. ``en=svm``); other options go to polytox-ml
    (``mode``, ``head``, ``device``, ``lm_batch_size``, ``embedding_cache``, ``dtype``, ``text``,
    ``scale``)."""

    # polytox-ml's options (``**ml_options`` goes to it), then its own: one schema, checked before it is built
    OPTIONS: ClassVar[dict[str, Option]] = {
        **PolytoxMlScorer.OPTIONS,
        "routes": Option("str", default="", help="LANG=SCORER routes, comma-separated"),
    }

    name = "default"
    batch_size = 4096

    def __init__(self, routes: str = OPTIONS["routes"].default, **ml_options: Any) -> None:
        table = dict(DEFAULT_ROUTES)
        for item in (x for x in routes.split(",") if x.strip()):
            lang, sep, scorer = item.partition("=")
            if not sep or not lang.strip() or not scorer.strip():
                raise BadValueError(
                    f"scorer 'default' option routes: {item.strip()!r} is not LANG=SCORER "
                    "(e.g. routes=en=svm,de=polytox-ml)",
                    "routes",
                )
            table[lang.strip()] = scorer.strip()
        self.routes = table
        self.scorers: dict[str, Scorer] = {}
        for scorer_name in sorted(set(table.values())):
            options = ml_options if scorer_name == "polytox-ml" else {}
            self.scorers[scorer_name] = resolve("scorer", scorer_name)(**options)
        self.languages = frozenset(lang for lang, s in table.items() if self.scorers[s].supports(lang))
        ids = {lang: self.scorers[s].id for lang, s in sorted(table.items())}
        self.version = config_digest(ids)
        ml = self.scorers.get("polytox-ml")  # its ``attributes`` option (the heads) sets what is scored
        self.attributes = tuple(getattr(ml, "attributes", ("toxicity",))) if ml is not None else ("toxicity",)

    @property
    def raw_id(self) -> str:
        """The cache identity: every route's raw-score identity (``raw_id``) where it has one, else its id."""
        return f"{self.name}@" + config_digest(
            {lang: getattr(self.scorers[s], "raw_id", self.scorers[s].id) for lang, s in sorted(self.routes.items())}
        )

    def from_cached(self, scores: Sequence[Score], langs: Sequence[str]) -> list[Score | None]:
        """Cached scores read as each language's route reads them (``PolytoxMlScorer.from_cached``); a route
        without raw scores serves its cached values as they are."""
        out: list[Score | None] = list(scores)
        by_scorer: dict[str, list[int]] = {}
        for i, lang in enumerate(langs):
            by_scorer.setdefault(self.routes.get(lang, ""), []).append(i)
        for scorer_name, rows in by_scorer.items():
            reader = getattr(self.scorers.get(scorer_name), "from_cached", None)
            if reader is not None:
                for i, score in zip(rows, reader([scores[i] for i in rows], [langs[i] for i in rows]), strict=True):
                    out[i] = score
        return out

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        """As the language's route scores it (polytox-ml's per-attribute language lists)."""
        route = self.scorers.get(self.routes.get(lang, ""))
        return attribute.lower() in self.attributes and route is not None and route.supports_attribute(attribute, lang)

    def describe(self) -> dict[str, Any]:
        out = {**super().describe(), "routes": {lang: self.scorers[s].id for lang, s in sorted(self.routes.items())}}
        ml = self.scorers.get("polytox-ml")
        if ml is not None and "scale" in ml.describe():
            out["scale"] = ml.describe()["scale"]
        return out

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        out: list[Score | None] = [None] * len(texts)
        by_scorer: dict[str, list[int]] = {}
        for i, lang in enumerate(langs):
            by_scorer.setdefault(self.routes[lang], []).append(i)
        for scorer_name, rows in by_scorer.items():
            scores = self.scorers[scorer_name].score([texts[i] for i in rows], [langs[i] for i in rows])
            for i, score in zip(rows, scores, strict=True):
                value = score.get("toxicity")
                if not score.ok:
                    out[i] = score
                elif value is None:
                    out[i] = Score.failed(f"NO_TOXICITY: {scorer_name} returned no toxicity value")
                else:  # this scorer's attributes the route gives (and the raw value, where it keeps one)
                    kept = (*self.attributes, RAW_KEY)
                    out[i] = Score(values={k: v for k, v in (score.values or {}).items() if k in kept})
        return [s if s is not None else Score.failed("internal: unrouted") for s in out]

    def close(self) -> None:
        for scorer in self.scorers.values():
            scorer.close()
