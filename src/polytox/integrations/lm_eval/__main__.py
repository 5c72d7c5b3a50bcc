"""``python -m polytox.integrations.lm_eval --include-path``: print the task folder to pass to lm_eval."""

from __future__ import annotations

import argparse
import sys

from . import include_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polytox.integrations.lm_eval", description=__doc__)
    parser.add_argument(
        "--include-path",
        action="store_true",
        help="print the folder of polytox's lm-eval task YAMLs (for lm_eval --include_path)",
    )
    parser.add_argument("--list", action="store_true", help="print the task names the folder defines")
    args = parser.parse_args(argv)
    folder = include_path()
    if args.list:
        for path in sorted(folder.glob("*.yaml")):
            print(path.stem)
        return 0
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
