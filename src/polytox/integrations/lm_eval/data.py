"""Local PTP / RTP-LX prompts for the ``ptp_polytox_<lang>`` tasks (lm-eval's ``custom_dataset`` hook).

The file or folder comes from ``lm_eval --metadata '{"polytox_data": "PATH"}'`` or the environment
variable ``POLYTOX_PTP_DATA``; records are read and validated by polytox's own prompt loader (PTP,
RTP-LX or generic JSONL/CSV/Parquet, recognised from the first record), so a bad record stops the task
with its file and line, as in ``polytox eval``.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import PolytoxError, require
from ...prompts import load_prompts
from ...spec import PromptSpec

ENV_DATA = "POLYTOX_PTP_DATA"
METADATA_KEY = "polytox_data"


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
