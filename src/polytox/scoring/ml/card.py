"""The scorer card: each offline scorer's measured agreement, read from the committed measurement file.

``polytox train-scorer`` writes the file (``training.scorer.measurements``) next to the head; ``polytox scorers``
prints it. Nothing here computes a number: the card only shows what the file holds, so what users read is
what was measured on the held-out split.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..._util.numfmt import fmt_num
from ...errors import PolytoxError

DEFAULT_CARD = "polytox-ml-card.json"
POOLED_RUN = "all models"  # the real-run row pooled over models (``measure.run_metrics``)

COLUMNS = (
    ("auc_prompts", "AUC web prompts"),
    ("auc_web_continuations", "AUC web cont"),
    ("auc_model_continuations", "AUC model cont"),
    ("mae_web", "MAE web"),
    ("mae_model_continuations", "MAE model cont"),
    ("share_model_continuations", ">=0.5 model cont"),
    ("ece_web", "ECE web"),
    ("ece_model_continuations", "ECE model cont"),
    ("mean_auc_humans", "AUC humans mean"),
    ("min_auc_humans", "min"),
)


def default_card_path() -> Path:
    return Path(str(files("polytox").joinpath("data", DEFAULT_CARD)))


def load_card(path: Path | str | None = None) -> dict[str, Any]:
    path = Path(path) if path else default_card_path()
    if not path.exists():
        raise PolytoxError(f"scorer measurements {path} not found; 'polytox train-scorer' writes them")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PolytoxError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict) or "card" not in data:
        raise PolytoxError(f"{path}: not a polytox scorer measurement file (no 'card')")
    return data


def _has_ci(ci: Any) -> bool:
    """Whether a stored interval is usable: files made before the CIs were added have none, and a slice
    without both classes stores [None, None]."""
    return bool(ci) and None not in ci


def value_with_ci(value: float, ci: Any, signed: bool = False, percent: bool = False) -> str:
    """A value with its CI, ``0.943 [0.910, 0.992]`` (``signed``: ``+0.008 [-0.012, +0.031]``; ``percent``:
    a share difference in points, ``-1.07 pt [-2.12, -0.03]``); without a usable CI only the value."""
    scale, unit = (100.0, " pt") if percent else (1.0, "")
    fmt = "{:+.2f}" if percent else ("{:+.3f}" if signed else "{:.3f}")
    span = ci_text(ci, fmt, scale)
    return f"{fmt.format(scale * value)}{unit}{' ' + span if span else ''}"


def ci_text(ci: Any, fmt: str = "{:.3f}", scale: float = 1.0) -> str:
    """A stored interval as ``[0.910, 0.992]``; empty if it is not usable (``_has_ci``)."""
    return f"[{fmt.format(scale * ci[0])}, {fmt.format(scale * ci[1])}]" if _has_ci(ci) else ""


def diff_with_ci(diff: float, ci: Any) -> str:
    """A signed difference with its CI, ``+0.008 [-0.012, +0.031]``."""
    return value_with_ci(diff, ci, signed=True)


def card_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """Header + one row per scorer, as strings."""
    rows = [["scorer", *(label for _, label in COLUMNS)]]
    for name, card in data["card"].items():
        row = [name]
        for key, _ in COLUMNS:
            value = card.get(key)
            if key == "share_model_continuations":
                ref = card.get("perspective_share_model_continuations")
                share, ref_share = (fmt_num(v, 1, percent=True, nan="-") for v in (value, ref))
                row.append(f"{share} (P {ref_share})" if value is not None else "-")
            else:
                row.append(fmt_num(value, nan="-"))
        rows.append(row)
    return rows


def markdown_card(data: Mapping[str, Any]) -> str:
    rows = card_rows(data)
    lines = ["| " + " | ".join(rows[0]) + " |", "| --- |" + " ---: |" * (len(rows[0]) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def text_card(data: Mapping[str, Any]) -> str:
    rows = card_rows(data)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    any_card: Mapping[str, Any] = next(iter(data["card"].values()), {})
    out.append("")
    out.append(f"Held-out texts: web = RTP prompts and continuations (Perspective 2020), n={any_card.get('n_web')};")
    out.append(
        "model cont = GPT-2/GPT-Neo continuations (Perspective 2022), "
        f"n={any_card.get('n_model_continuations')}; >=0.5 = share scored >= 0.5 (P: Perspective's)."
    )
    out.append(
        "AUC humans = RTP-LX per language (mean, min), grouped out-of-fold. "
        f"Head {data.get('head_digest')}; details: docs/default-scorer.md."
    )
    out.append(
        "--targets: each target beside its value with a 95% CI (MAE: and the best any monotone map of the "
        "score could do); --run: EMT/EP/AT of a real run; --lang."
    )
    return "\n".join(out)


def _verdict(value: float, ci: Any, lo: float, hi: float) -> str:
    """Whether ``value`` lies in the target band [lo, hi], and whether its CI crosses the band's edge."""
    inside = lo <= value <= hi
    ci_ok = _has_ci(ci)
    crosses = ci_ok and (ci[0] < lo <= ci[1] or ci[0] <= hi < ci[1])
    if inside:
        return "met; CI crosses the target" if crosses else "met"
    reaches = ci_ok and ci[1] >= lo and ci[0] <= hi
    return "missed; CI reaches the target" if reaches else "missed"


def target_rows(data: Mapping[str, Any], scorer: str = "default") -> list[list[str]]:
    """Each target of the default scorer (``measure.TARGETS``) beside its held-out value, the value's 95% CI
    and a verdict. Header first. Rows whose value the file lacks are left out."""
    card, targets = data["card"].get(scorer, {}), data.get("targets", {})
    rows = [["measure", "target", "measured [95% CI]", "verdict"]]

    def add(
        name: str,
        target_text: str,
        value: Any,
        ci: Any,
        lo: float,
        hi: float,
        floor: Any = None,
        floor_oof: Any = None,
        **style: bool,
    ) -> None:
        if value is not None:
            verdict = _verdict(value, ci, lo, hi)
            if floor is not None:  # ``measure.mae_floor``: the best any map of this score does on these texts
                verdict += f"; best monotone map of this score: {floor:.3f}"
                if floor_oof is not None:  # ``measure.mae_floor_out_of_fold``: that map fitted on other folds
                    verdict += f" in sample, {floor_oof:.3f} out of fold"
            rows.append([name, target_text, value_with_ci(value, ci, **style), verdict])

    auc_t, mae_t = targets.get("perspective_auc", 0.95), targets.get("mae", 0.05)
    add(
        "AUC vs humans, mean of 17 languages",
        f">= {targets.get('mean_auc', 0.85)}",
        card.get("mean_auc_humans"),
        card.get("mean_auc_humans_ci"),
        targets.get("mean_auc", 0.85),
        1.0,
    )
    add(
        f"AUC vs humans, lowest language ({card.get('min_auc_language', '?')})",
        f">= {targets.get('min_auc', 0.75)}",
        card.get("min_auc_humans"),
        card.get("min_auc_humans_ci"),
        targets.get("min_auc", 0.75),
        1.0,
    )
    for key, label in (
        ("auc_prompts", "web prompts"),
        ("auc_web_continuations", "web continuations"),
        ("auc_model_continuations", "model continuations"),
    ):
        add(f"AUC vs Perspective, {label}", f">= {auc_t}", card.get(key), card.get(f"{key}_ci"), auc_t, 1.0)
    for key, label in (("mae_web", "web"), ("mae_model_continuations", "model continuations")):
        add(
            f"MAE vs Perspective, {label}",
            f"<= {mae_t}",
            card.get(key),
            card.get(f"{key}_ci"),
            0.0,
            mae_t,
            floor=card.get(key.replace("mae_", "mae_floor_")),
            floor_oof=card.get(key.replace("mae_", "mae_floor_oof_")),
        )
    points = targets.get("share_points", 1.0) / 100
    for part, label in (("web", "web"), ("model_continuations", "model continuations")):
        share, ref = card.get(f"share_{part}"), card.get(f"perspective_share_{part}")
        if share is not None and ref is not None:
            add(
                f"share >= 0.5 minus Perspective's, {label}",
                f"within {targets.get('share_points', 1.0):g} pt",
                share - ref,
                card.get(f"share_diff_{part}_ci"),
                -points,
                points,
                signed=True,
                percent=True,
            )
    runs = data.get("scorers", {}).get(scorer, {}).get("run", [])
    for pooled in (r for r in runs if r["model"] == POOLED_RUN):
        for key in ("emt", "ep", "at"):
            bound = targets.get(key, 0.0)
            add(
                f"{key.upper()} diff, real run ({_run_size(pooled)})",
                f"within {bound}",
                pooled[f"{key}_diff"],
                pooled.get(f"{key}_diff_ci"),
                -bound,
                bound,
                signed=True,
            )
    return rows


def _run_size(pooled: Mapping[str, Any]) -> str:
    """How big the pooled real run is, and what its CI resamples."""
    size = f"{pooled['n_prompts']} (model, prompt) pairs"
    groups = pooled.get("n_prompt_groups")
    return f"{size} over {groups} prompts, prompts resampled" if groups else size


def markdown_targets(data: Mapping[str, Any], scorer: str = "default") -> str:
    rows = target_rows(data, scorer)
    lines = ["| " + " | ".join(rows[0]) + " |", "| --- | --- | --- | --- |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def attribute_table(card: Mapping[str, Any] | None = None) -> str:
    """The card of the seven attribute heads (stored in the attribute file's ``meta["card"]`` by the study
    that fitted them, docs/default-scorer.md): per attribute, held-out English AUC and MAE against Perspective's own
    value and the mean per-language human AUC on RTP-LX, each beside TOXICITY's value read as that
    attribute (the proxy) and a constant guess (the fit part's mean: AUC 0.5)."""
    if card is None:
        from .head import AttributeHeads

        card = AttributeHeads.load().meta.get("card", {})
    summary = card.get("summary", {})
    header = ["attribute", "AUC en", "proxy", "MAE en", "proxy", "const", "AUC humans", "proxy", "languages"]
    rows = [header]
    languages = card.get("languages", {})
    for name, s in summary.items():
        if not isinstance(s, Mapping):
            continue
        langs = languages.get(name, [])
        rows.append(
            [
                name.upper(),
                _num(s.get("en_auc")),
                _num(s.get("en_proxy_auc")),
                _num(s.get("en_mae")),
                _num(s.get("en_proxy_mae")),
                _num(s.get("en_constant_mae")),
                _num(s.get("lx_mean_auc")),
                _num(s.get("lx_proxy_mean_auc")),
                "17" if len(langs) >= 17 else ",".join(langs),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    n = card.get("n", {})
    out.append("")
    out.append(
        f"Attributes beside TOXICITY (--scorer-opt attributes=ptp|rtp|LIST). Held-out English rows with "
        f"Perspective's values: n={n.get('english')}; AUC at Perspective >= 0.5. AUC humans: RTP-LX held-out, "
        f"mean over languages of the AUC at the category's mean rating >= 3 (IDENTITY_ATTACK: IdentityAttack, "
        f"INSULT: Insult, THREAT: Violence, SEXUALLY_EXPLICIT: SexualContent; the others against Toxicity), "
        f"n={n.get('rtp_lx')}. proxy = TOXICITY's value read as the attribute; const = the fit part's mean."
    )
    out.append("Each attribute has one scale (Perspective's); TOXICITY's named scales are TOXICITY's alone.")
    human = card.get("human_auc", {})
    if human:
        langs = sorted({lang for per in human.values() for lang in per})
        out += [
            "",
            "Human AUC per language (RTP-LX held-out; attribute / TOXICITY as the attribute; - : no positive row)",
        ]
        out.append("  ".join(["attribute".ljust(18), *(lang.rjust(9) for lang in langs)]))
        for name, per in human.items():
            cells = []
            for lang in langs:
                auc, proxy = (per.get(lang) or [None, None, 0])[:2]
                cells.append(("-" if auc is None else f"{auc:.2f}/{proxy:.2f}").rjust(9))
            out.append("  ".join([name.upper().ljust(18), *cells]))
    return "\n".join(out)
