"""Metrics of a stored run directory (one of its scorers) or of an RTP-style generations JSONL.

What ``polytox metrics PATH`` prints and ``polytox.open_run(PATH).metrics()`` returns: the same defaults,
scorer choice and scale re-reading. Two lazy imports reach up the layers (listed in the import-linter
contract): ``scoring.ml.rescale`` re-reads stored raw scores on another scale, ``detox.run_metrics`` adds
the stored detox method, distinct-n and fluency figures. A run's metrics are computed once per scorer,
settings and seed and kept in ``RUN/derived/`` (``kept_run_metrics``), so reading them again costs the
damage check and a small JSON file, not a pass over every score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from ..spec import MetricsSpec


def compute_for_path(
    path: Path,
    spec: MetricsSpec,
    scorer: str | None = None,
    seed: int | None = None,
    skip_bad: bool = False,
    scale: str | None = None,
    attribute: str = "toxicity",
) -> dict[str, Any]:
    """Metrics for a run directory (one of its scorers) or an RTP-style generations JSONL. ``seed``: the
    bootstrap seed; None: a run's own seed (so the intervals equal its ``metrics.json``), 0 for a file.
    ``attribute``: which stored attribute the metrics read (``severe_toxicity`` ...; default toxicity)."""
    from . import compute, per_prompt_table, run_metrics

    attribute = attribute.strip().lower()
    if scale and attribute != "toxicity":
        raise PolytoxError(f"--scale re-reads toxicity only (its raw values); not {attribute!r}")

    if path.is_dir():
        from ..store.reader import RunReader

        store = RunReader(path)
        manifest = store.check_readable()  # not a run, a damaged manifest or part: one line
        ids = store.scorer_ids()
        if not ids:
            raise PolytoxError(f"{path} has no scores yet (a run that has not scored its first shard)")
        chosen = scorer or manifest.get("scorer", {}).get("id") or ids[0]
        from ..store.files import slug

        if slug(chosen) not in ids:
            raise PolytoxError(f"{path} has no scores of {chosen!r}; it has: {', '.join(ids)}")
        rescale = None
        if scale:
            from ..scoring.ml.rescale import run_rescale

            rescale = run_rescale(manifest, chosen, scale)
        run_seed = seed if seed is not None else int(manifest.get("seed", manifest["spec"].get("seed", 0)) or 0)
        if rescale is None:  # kept in RUN/derived/ with the identities of the parts they came from
            metrics = kept_run_metrics(store, chosen, spec, run_seed, attribute)
        else:  # a scale's map is not a run file: re-read each time
            metrics = run_metrics(str(path), chosen, spec, seed=run_seed, rescale=rescale, attribute=attribute)
        if rescale is None and chosen == manifest.get("scorer", {}).get("id") and manifest["scorer"].get("scale"):
            metrics["scale"] = manifest["scorer"]["scale"]  # the scale the run was scored on
        from ..detox.run_metrics import stored_detox_metrics  # detox method, distinct-n, stored fluency

        return {
            "model": manifest["spec"]["generation"]["model"],
            **metrics,
            **stored_detox_metrics(store, store.spec()),
            **incomplete(store, manifest, chosen),
        }
    if not path.exists():
        raise PolytoxError(f"no such file or directory: {path}")
    if scale:
        raise PolytoxError(f"--scale re-reads a run directory's stored raw scores; {path} is a generations file")
    from .generations_jsonl import load_generations_jsonl

    con, problems = load_generations_jsonl(path, skip_bad=skip_bad, attribute=attribute)
    extra: dict[str, Any] = {"source": str(path), "n_bad_lines": len(problems), "bad_lines": problems[:1000]}
    if attribute != "toxicity":
        extra["attribute"] = attribute
    return compute(per_prompt_table(con, spec), spec, seed or 0, extra=extra)


def incomplete(store: Any, manifest: dict[str, Any], scorer: str) -> dict[str, Any]:
    """``{"incomplete": {...}}`` when the run has shards still unscored (stopped, interrupted, running)."""
    sizes = store.stored_plan(store.spec())
    if sizes is None:
        return {}
    scored = sum(store.has_scores(scorer, i) for i in range(len(sizes)))
    if scored >= len(sizes):
        return {}
    return {"incomplete": {"shards": len(sizes), "shards_scored": scored, "status": manifest.get("status")}}


def kept_run_metrics(
    store: Any, scorer: str, spec: MetricsSpec, seed: int, attribute: str = "toxicity"
) -> dict[str, Any]:
    """``run_metrics`` of a run for one scorer, attribute, settings and bootstrap seed, computed once and
    kept in ``RUN/derived/metrics-KEY.json`` with the identities of the prompts file, the generation parts and
    the scorer's score parts (``_util.derived``): recomputed when any of them, the settings or the
    polytox version differ, never read from a stale or damaged file."""
    from .. import __version__
    from .._util import derived
    from ..langs import load_resource_tiers
    from . import run_metrics

    settings = {
        "what": "metrics",
        "polytox": __version__,
        "scorer": scorer,
        "attribute": attribute,
        "threshold": spec.threshold,
        "comparison": spec.comparison,
        "n_bootstrap": spec.n_bootstrap,
        "ci_level": spec.ci_level,
        "seed": seed,
        "resource_tiers": load_resource_tiers(),  # POLYTOX_RESOURCE_TIERS may override the table
    }

    def inputs() -> dict[str, str]:
        files = [store.prompts_path, *(store.path / "generations").glob("part-*.parquet")]
        files += store.scores_dir(scorer).glob("part-*.parquet")
        return derived.identities(store.path, files)

    path = store.path / "derived" / f"metrics-{derived.key(settings)}.json"
    return derived.memo(
        path, settings, inputs, lambda: run_metrics(str(store.path), scorer, spec, seed=seed, attribute=attribute)
    )
