"""Entry point: ``polytox <subcommand>``. Errors a user can fix print one clear message, exit code 2.

A user's mistake (a ``PolytoxError``, or arguments argparse refuses) prints one ``polytox: error: ...``
line and exits with 2; ``--debug`` or ``POLYTOX_DEBUG=1`` prints its traceback first. Any other exception
is a bug in polytox and keeps its traceback (exit code 1). A run stopped by a fatal generation
failure prints its cause and the resume command, exit code 4 (docs/cli.md). docs/errors.md lists the rules.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from typing import NoReturn

from .._util.options import TRUE_WORDS
from ..errors import (
    EXIT_INTERRUPTED,
    EXIT_STOPPED,
    EXIT_USAGE,
    FatalGenerationError,
    PolytoxError,
    RunStoppedError,
)

SUBCOMMANDS = {
    "eval": "polytox.cli.eval_cmd",
    "metrics": "polytox.cli.metrics_cmd",
    "score": "polytox.cli.score_cmd",
    "compare-scorers": "polytox.cli.compare_cmd",
    "calibrate": "polytox.cli.calibrate_cmd",
    "leaderboard": "polytox.cli.leaderboard_cmd",
    "analyze": "polytox.cli.analyze_cmd",
    "report": "polytox.cli.report_cmd",
    "unprompted": "polytox.cli.unprompted_cmd",
    "build": "polytox.cli.build_cmd",
    "train-scorer": "polytox.cli.train_scorer_cmd",
    # the default scorer's other steps (embed the pool, the scales' raw outputs, fit the scales)
    "train-scorer-step": "polytox.cli.train_scorer_step_cmd",
    # pretraining-corpus analysis (RTP §6)
    "corpus": "polytox.cli.corpus_cmd",
    # polytox serve: local Perspective / OpenAI moderation endpoint (extra "serve")
    "serve": "polytox.cli.serve_cmd",
    # scorer card (measured agreement of each offline scorer)
    "scorers": "polytox.cli.scorers_cmd",
    # detoxification methods of RTP §5 (train, compare, perplexity)
    "detox": "polytox.cli.detox_cmd",
    # a framework's run (inspect_ai, HELM, lm-eval) as a polytox run directory
    "import": "polytox.cli.import_cmd",
}


DEBUG_ENV = "POLYTOX_DEBUG"  # set to 1 (or true/yes): show the traceback of user errors too


class Parser(argparse.ArgumentParser):
    """argparse's parser whose refusals read like every other polytox error: one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == "polytox" else f"{self.prog}: "
        self.exit(2, f"polytox: error: {where}{message} (see '{self.prog} --help')\n")


def add_debug_flag(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """``--debug`` on the parser and every subcommand's, so it works before or after the subcommand
    (a subcommand's default must not reset the value given before it: ``SUPPRESS``)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help=f"print the traceback of user errors too (also: {DEBUG_ENV}=1)",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_debug_flag(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="polytox", description="Measure neural toxic degeneration (RTP/PTP).")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"polytox {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        importlib.import_module(module).register(sub)
    add_debug_flag(parser, top=True)
    from .checks import install

    install(parser)  # every numeric flag range-checked, every output path checked, before any work
    set_own_parser(parser)
    return parser


def set_own_parser(parser: argparse.ArgumentParser) -> None:
    """Each subcommand records its own parser in the namespace (the innermost wins), so an unknown flag is
    refused by the subcommand that got it and points to that subcommand's help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(_parser=sub)
                set_own_parser(sub)


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args, extra = parser.parse_known_args(argv)
    if extra:
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def stdout_closed() -> int:
    """The reader closed stdout early (``polytox scorers --json | head -1``): stop quietly, as a C tool
    killed by SIGPIPE would (exit 141), without a traceback and without a second error at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 128 + 13


def debug_wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_ENV, "").strip().lower() in TRUE_WORDS


def check_utf8_arguments(args: argparse.Namespace) -> None:
    """Refuse an argument holding a byte that is not UTF-8 (Python passes it as a lone surrogate, which no
    file, manifest or console can write later), before anything is created."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and any("\udc80" <= ch <= "\udcff" for ch in item):
                shown = item.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                flag = "--" + name.replace("_", "-")
                raise PolytoxError(f"argument {flag}: '{shown}' holds a byte that is not UTF-8; rename the path")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    logging.basicConfig(level=logging.INFO, format="polytox: %(message)s", stream=sys.stderr)
    try:
        check_utf8_arguments(args)
        return int(args.func(args) or 0)
    except (RunStoppedError, FatalGenerationError) as exc:
        if debug_wanted(args):
            traceback.print_exc()
        print(f"polytox: error: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except PolytoxError as exc:  # BadInputError, MissingDependencyError, ...: the user can fix these
        if debug_wanted(args):
            traceback.print_exc()
        print(f"polytox: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        print("polytox: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
