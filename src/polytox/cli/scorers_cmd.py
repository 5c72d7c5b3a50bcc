"""The ``polytox scorers`` subcommand: reads the measurement file committed with the polytox-ml head
(``polytox.scoring.ml.card``) and prints its sections as tables.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import PolytoxError
from .flags import AUC_BY_LANG, add_lang

DESCRIPTION = """\
The scorer card: each offline scorer's agreement with Perspective and with human ratings, measured on
held-out texts.

--lang adds the per-language AUC against RTP-LX human ratings; --run the EMT / EP / AT of a real run
recomputed with each scorer against the stored Perspective scores (with the 95% paired bootstrap CI of each
difference); --targets each target of the default scorer beside its value, its 95% CI and a verdict;
--scales every named scale of polytox-ml (chosen in eval and score with --scorer-opt scale=NAME) with
its error on every era's data; --json prints the whole file and --markdown the tables as Markdown.
--options lists instead every scorer's options (--scorer-opt KEY=VALUE) with type, allowed values, default
and help; --options generators the backends' --model-opt options, --options detox those of the --detox
NAME:KEY=VALUE methods. A value outside an option's range is refused before any work starts.

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
    add_lang(p, AUC_BY_LANG)
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
    p.add_argument(
        "--attributes",
        action="store_true",
        help="also print the seven attributes beside TOXICITY: held-out AUC and MAE against Perspective and "
        "human AUC, each beside TOXICITY read as that attribute and a constant guess",
    )
    p.add_argument(
        "--options",
        nargs="?",
        const="scorers",
        choices=OPTION_KINDS,
        help="list the options of every scorer (default), generator backend or detox method: type, allowed "
        "values, default, help",
    )
    p.add_argument("--markdown", action="store_true", help="print the card (or the options) as Markdown tables")
    p.add_argument("--json", action="store_true", help="print the whole measurement file")
    p.set_defaults(func=run)


OPTION_KINDS = ("scorers", "generators", "detox", "all")
SECTIONS = {
    "scorers": "Scorers (`--scorer-opt`)",
    "generators": "Generation backends (`--model-opt`)",
    "detox": "Detox methods (`--detox NAME:KEY=VALUE`)",
}
PAGE_HEAD = """# Options of scorers, backends and detox methods

Generated from the options each component declares (`polytox scorers --options all --markdown`; a test
keeps this page current). A value is checked against its option's type and range before any work starts;
a wrong one stops the command with one line naming the component, the option, what it takes and the value
given. `-` as a default: none, or worked out at run time. Every scorer also takes `cache=PATH|off` and
`calibration=FILE` ([scorers.md](scorers.md))."""


def options_listing(kind: str, markdown: bool = False) -> str:
    """Every declared option of each scorer, generator backend or detox method (``polytox._util.options``),
    as plain-text tables or (``markdown``) as the Markdown of ``docs/options.md``."""
    from .._util.options import declared_options, format_options, markdown_options
    from ..registry import GENERATORS, SCORERS, names, resolve

    render = markdown_options if markdown else format_options
    if kind == "all":
        parts = [PAGE_HEAD] if markdown else []
        for one, title in SECTIONS.items():
            parts += [f"## {title}" if markdown else title, options_listing(one, markdown)]
        return "\n\n".join(parts)
    # the page lists polytox's own components; the terminal listing plugins as well
    listed = {
        k: sorted(n for n, target in table.items() if target.startswith("polytox.")) if markdown else names(k)
        for k, table in (("scorer", SCORERS), ("generator", GENERATORS))
    }
    if kind == "scorers":
        from ..scoring import scorer_schema

        tables = [render(f"scorer {n}", scorer_schema(resolve("scorer", n))) for n in listed["scorer"]]
    elif kind == "generators":
        tables = [render(f"backend {n}", declared_options(resolve("generator", n))) for n in listed["generator"]]
    else:
        from ..detox.methods import METHODS

        tables = [render(f"detox {n}", options) for n, (_, _, options) in METHODS.items()]
    return "\n\n".join(tables)


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
    if args.options:
        print(options_listing(args.options, args.markdown))
        return 0
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

    sections = args.lang or args.run or args.targets or args.attributes
    if args.scales or not sections:  # a section flag prints that section alone
        print("\n" + scales_overview())
    if args.attributes or not (sections or args.scales):
        from ..scoring.ml.card import attribute_table

        print("\n" + attribute_table())
    if args.scales:
        print("\n" + scales_detail())
    if args.lang:
        print("\n" + language_table(data))
    if args.run:
        print("\n" + run_table(data))
    if args.targets:
        print("\n" + markdown_targets(data))
    return 0
