"""Prompts of polytox's lm-eval tasks (lm-eval's ``custom_dataset`` hook): local files, or RTP from the Hub.

The file or folder comes from ``lm_eval --metadata '{"polytox_data": "PATH"}'`` or an environment
variable (``POLYTOX_PTP_DATA`` for ``ptp_polytox_<lang>``, ``POLYTOX_RTP_DATA`` for the
``realtoxicityprompts_polytox`` tasks); records are read and validated by polytox's own prompt loader
(RTP, PTP, RTP-LX or generic JSONL/CSV/Parquet, recognised from the first record), so a bad record stops
the task with its file and line, as in ``polytox eval``. The RTP tasks without a file read
``allenai/real-toxicity-prompts`` from the Hub, as lm-eval's built-in task does.

lm-eval calls these hooks when it loads a task, before any generation, while it builds the scoring filter
only after generating: so the hooks also resolve and build the scorer the ``POLYTOX_*`` variables choose
(``check_scorer``), and a bad choice ends the run then, with one line.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import PolytoxError, require
from ...prompts import load_prompts
from ...spec import PromptSpec
from ..scoring import load_scorer

ENV_DATA = "POLYTOX_PTP_DATA"
ENV_RTP_DATA = "POLYTOX_RTP_DATA"
METADATA_KEY = "polytox_data"
RTP_HUB_ID = "allenai/real-toxicity-prompts"


def check_scorer(task: str) -> None:
    """Resolve and build the scorer of the ``POLYTOX_*`` variables (default: ``default``) at task load: a
    typo, a missing key or a bad threshold is one ``polytox: error:`` line and exit 2, before generation. A
    task YAML of your own that names its scorer in the filter's arguments is checked at the filter step."""
    load_scorer(where=f"lm-eval task {task}")


def ptp_dataset(lang: str, **kwargs: Any) -> dict[str, Any]:
    """``{"test": Dataset}`` of one language's prompts: ``id``, ``text``, ``lang``, ``prompt_toxicity``."""
    check_scorer(f"ptp_polytox_{lang}")
    datasets = require("datasets", "lm-eval")
    source = kwargs.get(METADATA_KEY) or os.environ.get(ENV_DATA)
    if not source:
        raise PolytoxError(
            f"ptp_polytox_{lang}: no prompt file; pass --metadata "
            f'\'{{"{METADATA_KEY}": "PATH"}}\' or set {ENV_DATA}=PATH (a PTP or RTP-LX '
            "file or folder)"
        )
    prompts = load_prompts(PromptSpec(source=str(source), langs=(lang,))).prompts
    rows = [{"id": p.id, "text": p.text, "lang": p.lang, "prompt_toxicity": p.toxicity} for p in prompts]
    return {"test": datasets.Dataset.from_list(rows)}


def rtp_dataset(**kwargs: Any) -> Any:
    """The RTP tasks' prompts: a local RTP-format (or PTP / RTP-LX / generic) file as ``{"train": Dataset}``
    whose rows carry ``prompt.text`` like the Hub's, or, with no file named, the Hub dataset itself."""
    check_scorer("realtoxicityprompts_polytox")
    datasets = require("datasets", "lm-eval")
    source = kwargs.get(METADATA_KEY) or os.environ.get(ENV_RTP_DATA)
    if not source:
        return datasets.load_dataset(RTP_HUB_ID)
    # English only: RTP is English, and a PTP / RTP-LX file named for the PTP tasks of the same run serves
    # its English prompts here
    prompts = load_prompts(PromptSpec(source=str(source), langs=("en",))).prompts
    rows = [{"id": p.id, "prompt": {"text": p.text, "toxicity": p.toxicity}, "lang": p.lang} for p in prompts]
    return {"train": datasets.Dataset.from_list(rows)}
