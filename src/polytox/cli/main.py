"""Entry point: ``polytox <subcommand>``. Errors a user can fix print one clear message, exit code 2; a run
stopped by a fatal generation failure prints its cause and resume command, exit code 4 (docs/cli.md)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from ..errors import (
    EXIT_INTERRUPTED,
    EXIT_STOPPED,
    EXIT_USAGE,
    BadInputError,
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
    # pretraining-corpus analysis (RTP §6)
    "corpus": "polytox.cli.corpus_cmd",
    # polytox serve: local Perspective / OpenAI moderation endpoint (extra "serve")
    "serve": "polytox.cli.serve_cmd",
    # scorer card (measured agreement of each offline scorer)
    "scorers": "polytox.cli.scorers_cmd",
    # detoxification methods of RTP §5 (train, compare, perplexity)
    "detox": "polytox.cli.detox_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polytox", description="Measure neural toxic degeneration (RTP/PTP).")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"polytox {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="polytox: %(message)s", stream=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except (RunStoppedError, FatalGenerationError) as exc:
        print(f"polytox: error: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except BadInputError as exc:
        print(f"polytox: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PolytoxError as exc:
        print(f"polytox: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("polytox: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
