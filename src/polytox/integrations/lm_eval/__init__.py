"""lm-evaluation-harness tasks scored by polytox instead of Perspective.

``tasks/`` holds the task YAMLs (``python -m polytox.integrations.lm_eval --include-path`` prints it, for
``lm_eval --include_path``): ``realtoxicityprompts_polytox`` (the built-in task's prompts and generation
settings), ``realtoxicityprompts_polytox_k25`` (RTP's own: 25 samples, nucleus 0.9, 20 tokens) and
``ptp_polytox_<lang>`` for PTP's 17 languages over a local PTP or RTP-LX file (tag ``ptp_polytox``).
``metrics`` scores each task's generations in one batch and reports EMT / EP / AT and the missing scores.
Nothing here imports lm_eval until lm_eval itself loads the tasks.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["include_path"]


def include_path() -> Path:
    """The folder of polytox's task YAMLs, for ``lm_eval --include_path`` or ``TaskManager(include_path=)``."""
    return Path(str(resources.files(__name__) / "tasks"))
