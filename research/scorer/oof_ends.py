"""The three ends read over every held-out RTP-LX pair out of fold, the shipped scales against a candidate's
(log.md, "Tying the two paths: results"; it fits nothing and decides nothing).

The check part holds 48 pairs a language. ``scale-fit`` also reads every held-out pair (152 a language) by
maps cross-fitted without its Index group (``oof`` in its measurements): a second reading of the same
targets on three times the pairs, with maps that never saw the pair. This puts the shipped scales' and a
candidate's side by side, per language, on ``perspective-2022``.

    python -m research.scorer.oof_ends --after /tmp/scalefit5.json --out results/teacher-v5-oof.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polytox.scoring.ml.scales import PERSPECTIVE_2022

HERE = Path(__file__).resolve().parent
SHIPPED = HERE.parents[1] / "src" / "polytox" / "data" / "polytox-ml-scales.json"
KEYS = ("n_harmless", "harmless_diff", "harmless_share_diff", "n_toxic", "toxic_diff", "mae_diff", "kappa", "kappa_en")


def shipped_oof(path: Path) -> tuple[str, dict[str, Any]]:
    """(head digest, the oof pairs block) of the package's scales file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["head"], data["scales"][PERSPECTIVE_2022]["heldout"]["pairs"]


def candidate_oof(path: Path) -> dict[str, Any]:
    """The oof pairs block of ``scale-fit --measurements`` output (full head)."""
    return dict(json.loads(path.read_text(encoding="utf-8"))["full"]["pairs"][PERSPECTIVE_2022])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default=str(SHIPPED), help="the shipped scales file")
    p.add_argument("--after", required=True, help="the candidate's scale-fit --measurements file")
    p.add_argument("--name", default="V5")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    head, before = shipped_oof(Path(args.before))
    after = candidate_oof(Path(args.after))
    langs = sorted(before["oof"])
    rows = {
        lang: {k: [before["oof"][lang].get(k), after["oof"][lang].get(k)] for k in KEYS} for lang in langs
    }
    result = {
        "heads": [head, args.name],
        "scale": PERSPECTIVE_2022,
        "summary": {"before": before["oof_summary"], "after": after["oof_summary"]},
        "languages": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"| lang | harmless pairs | harmless - en, head 6 / {args.name} | toxic - en | kappa (English's) |")
    print("| --- | ---: | --- | --- | --- |")
    for lang, r in rows.items():
        h, t, k = r["harmless_diff"], r["toxic_diff"], r["kappa"]
        print(
            f"| {lang} | {r['n_harmless'][0]} | {h[0]:+.3f} / {h[1]:+.3f} | {t[0]:+.3f} / {t[1]:+.3f} "
            f"| {k[0]:.2f} / {k[1]:.2f} ({r['kappa_en'][0]:.2f}) |"
        )
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
