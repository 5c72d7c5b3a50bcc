"""The ``polytox scorers`` subcommand: reads the measurement file committed with the polytox-ml head
(``polytox.scoring.ml.card``) and prints its sections as tables.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import PolytoxError

DESCRIPTION = """\
The scorer card: each offline scorer's agreement with Perspective and with human ratings, measured on
held-out texts.

--lang adds the per-language AUC against RTP-LX human ratings; --run the EMT / EP / AT of a real run
recomputed with each scorer against the stored Perspective scores (with the 95% paired bootstrap CI of each
difference); --targets each target of the default scorer beside its value, its 95% CI and a verdict;
--scales every named scale of polytox-ml (chosen in eval and score with --scorer-opt scale=NAME) with
its error on every era's data; --json prints the whole file and --markdown the tables as Markdown.

example:
  polytox scorers --lang
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scorers",
        help="print the scorer card (measured agreement with Perspective and humans)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--card", help="measurement file (default: the one committed with the polytox-ml head)")
    p.add_argument("--lang", action="store_true", help="also print per-language AUC against human ratings")
    p.add_argument(
        "--run",
        action="store_true",
        help="also print EMT / EP / AT of the held-out real run: each scorer vs stored Perspective",
    )
    p.add_argument(
        "--targets",
        action="store_true",
        help="also print each target beside the default scorer's value, its 95%% CI and a verdict",
    )
    p.add_argument("--scales", action="store_true", help="also print every scale's held-out error on every era's data")
    p.add_argument("--markdown", action="store_true", help="print the card as a Markdown table")
    p.add_argument("--json", action="store_true", help="print the whole measurement file")
    p.set_defaults(func=run)


def language_table(data: dict[str, Any]) -> str:
    from ..scoring.ml.card import ci_text

    names = [n for n, m in data["scorers"].items() if m.get("languages")]
    langs = sorted({lang for n in names for lang in data["scorers"][n]["languages"]})
    lines = [
        "| lang | n | " + " | ".join(names) + f" | {names[0]} 95% CI |",
        "| --- | ---: |" + " ---: |" * (len(names) + 1),
    ]
    for lang in langs:
        first = data["scorers"][names[0]]["languages"].get(lang, {})
        cells = []
        for n in names:
            value = data["scorers"][n]["languages"].get(lang, {}).get("auc")
            cells.append("-" if value is None else f"{value:.3f}")
        cells.append(ci_text(first.get("auc_ci")) or "-")
        lines.append(f"| {lang} | {first.get('n', '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _diff(row: dict[str, Any], key: str) -> str:
    from ..scoring.ml.card import diff_with_ci

    diff = diff_with_ci(row[f"{key}_diff"], row.get(f"{key}_diff_ci"))
    return f"{row[f'{key}_perspective']:.3f} / {row[f'{key}_scorer']:.3f} ({diff})"


def run_table(data: dict[str, Any]) -> str:
    """EMT / EP / AT per scorer and model: Perspective / scorer (difference [95% paired bootstrap CI])."""
    lines = [
        "| scorer | model | prompts | K | EMT P / scorer (diff [CI]) | EP P / scorer (diff [CI]) "
        "| AT P / scorer (diff [CI]) |",
        "| --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for name, measured in data["scorers"].items():
        for row in measured.get("run", []):
            lines.append(
                f"| {name} | {row['model']} | {row['n_prompts']} | {row['k']} | "
                + " | ".join(_diff(row, key) for key in ("emt", "ep", "at"))
                + " |"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..scoring.ml.card import load_card, markdown_card, markdown_targets, text_card

    try:
        data = load_card(args.card)
    except (UnicodeDecodeError, IsADirectoryError) as exc:  # a binary file or a folder: not a card
        raise PolytoxError(f"{args.card}: not a polytox scorer measurement file ({type(exc).__name__})") from exc
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(markdown_card(data) if args.markdown else text_card(data))  # plain print: wide rows stay unwrapped
    from ..scoring.ml.scale_card import scales_detail, scales_overview

    if args.scales or not (args.lang or args.run or args.targets):  # a section flag prints that section alone
        print("\n" + scales_overview())
    if args.scales:
        print("\n" + scales_detail())
    if args.lang:
        print("\n" + language_table(data))
    if args.run:
        print("\n" + run_table(data))
    if args.targets:
        print("\n" + markdown_targets(data))
    return 0
