"""``polytox import``: a framework's run (inspect_ai, HELM, lm-evaluation-harness) as a polytox run directory.

``read_source`` recognises the output and reads it into an ``ImportedRun`` (``inspect_log``, ``helm_run``,
``lm_eval_samples``); ``write.store_run`` stores it with the run store's own writer. None of the readers
needs the framework installed.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ...errors import PolytoxError
from .records import Completion, ImportedPrompt, ImportedRun
from .write import ImportResult, check_out, store_run

__all__ = [
    "FRAMEWORKS",
    "Completion",
    "ImportResult",
    "ImportedPrompt",
    "ImportedRun",
    "check_out",
    "read_source",
    "recorded_scorer",
    "store_run",
]

FRAMEWORKS = ("inspect", "helm", "lm-eval")


def detect(path: Path) -> str:
    """Which framework wrote ``path``: an inspect log, a HELM run folder, or lm-eval samples output."""
    if path.is_file():
        if path.suffix == ".eval" or zipfile.is_zipfile(path):
            return "inspect"
        if path.name.startswith("samples_") and path.suffix == ".jsonl":
            return "lm-eval"
        if path.suffix == ".json":
            return "inspect"
    elif path.is_dir():
        if (path / "scenario_state.json").exists():
            return "helm"
        if any(path.rglob("samples_*.jsonl")):
            return "lm-eval"
    elif not path.exists():
        raise PolytoxError(f"{path}: no such file or folder")
    raise PolytoxError(
        f"{path}: not a framework output polytox can import (an inspect .eval/.json log, a HELM run folder "
        "with scenario_state.json, or lm-eval --log_samples output); name it with --framework"
    )


def read_source(path: str | Path, framework: str | None = None) -> ImportedRun:
    """Read ``path`` as ``framework``'s output (detected when None)."""
    source = Path(path)
    kind = framework or detect(source)
    if kind == "inspect":
        from .inspect_log import read_inspect_log

        return read_inspect_log(source)
    if kind == "helm":
        from .helm_run import read_helm_run

        return read_helm_run(source)
    if kind == "lm-eval":
        from .lm_eval_samples import read_lm_eval_samples

        return read_lm_eval_samples(source)
    raise PolytoxError(f"--framework {kind!r}: choose one of {', '.join(FRAMEWORKS)}")


def recorded_scorer(run: ImportedRun) -> tuple[str, dict[str, str]] | None:
    """The scorer the framework recorded, as a name and options to build it with (for an output that keeps no
    per-completion values, HELM's): its id's name, and the options recorded beside it. None when none is."""
    if not run.scorer_id:
        return None
    from ...spec import parse_options

    raw = str(run.generation.get("scorer_opt") or "")
    options = parse_options([x for x in raw.split(";") if x.strip()])
    return run.scorer_id.split("@", 1)[0], {k: str(v) for k, v in options.items()}
