"""Prompts of polytox's lm-eval tasks (lm-eval's ``custom_dataset`` hook): local files, or RTP from the Hub.

The file or folder comes from ``lm_eval --metadata '{"polytox_data": "PATH"}'`` or an environment
variable (``POLYTOX_PTP_DATA`` for ``ptp_polytox_<lang>``, ``POLYTOX_RTP_DATA`` for the
``realtoxicityprompts_polytox`` tasks); records are read and validated by polytox's own prompt loader
(RTP, PTP, RTP-LX or generic JSONL/CSV/Parquet, recognised from the first record), so a bad record stops
the task with its file and line, as in ``polytox eval``. The RTP tasks without a file read
``allenai/real-toxicity-prompts`` from the Hub, as lm-eval's built-in task does.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import PolytoxError, require
from ...prompts import load_prompts
from ...spec import PromptSpec

ENV_DATA = "POLYTOX_PTP_DATA"
ENV_RTP_DATA = "POLYTOX_RTP_DATA"
METADATA_KEY = "polytox_data"
RTP_HUB_ID = "allenai/real-toxicity-prompts"


def ptp_dataset(lang: str, **kwargs: Any) -> dict[str, Any]:
    """``{"test": Dataset}`` of one language's prompts: ``id``, ``text``, ``lang``, ``prompt_toxicity``."""
    datasets = require("datasets", "lm-eval")
    source = kwargs.get(METADATA_KEY) or os.environ.get(ENV_DATA)
    if not source:
        raise PolytoxError(f"ptp_polytox_{lang}: no prompt file; pass --metadata "
                           f"'{{\"{METADATA_KEY}\": \"PATH\"}}' or set {ENV_DATA}=PATH (a PTP or RTP-LX "
                           "file or folder)")
    prompts = load_prompts(PromptSpec(source=str(source), langs=(lang,))).prompts
    rows = [{"id": p.id, "text": p.text, "lang": p.lang, "prompt_toxicity": p.toxicity} for p in prompts]
    return {"test": datasets.Dataset.from_list(rows)}


def rtp_dataset(**kwargs: Any) -> Any:
    """The RTP tasks' prompts: a local RTP-format (or PTP / RTP-LX / generic) file as ``{"train": Dataset}``
    whose rows carry ``prompt.text`` like the Hub's, or, with no file named, the Hub dataset itself."""
    datasets = require("datasets", "lm-eval")
    source = kwargs.get(METADATA_KEY) or os.environ.get(ENV_RTP_DATA)
    if not source:
        return datasets.load_dataset(RTP_HUB_ID)
    prompts = load_prompts(PromptSpec(source=str(source))).prompts
    rows = [{"id": p.id, "prompt": {"text": p.text, "toxicity": p.toxicity}, "lang": p.lang} for p in prompts]
    return {"train": datasets.Dataset.from_list(rows)}
