# mypy: warn-unused-ignores
"""Calls of ``polytox.evaluate`` and ``Run.metrics`` that mypy must refuse (``make lint`` checks this file).

Each wrong call carries the ``type: ignore`` of the error mypy gives it; with ``warn-unused-ignores`` an
ignore that no longer silences an error fails the check, so a keyword that stops being typed
(``api.keywords.EvaluateSettings``) fails ``make lint``. Never run: it is read by mypy only.
"""

from __future__ import annotations

import polytox


def typos() -> None:
    polytox.evaluate(out="runs/x", sampels=3)  # type: ignore[call-arg]
    polytox.evaluate(out="runs/x", top_p="high")  # type: ignore[arg-type]
    polytox.evaluate(out="runs/x", chat_template="sometimes")  # type: ignore[arg-type]
    polytox.evaluate(out="runs/x", samples="many")  # type: ignore[arg-type]
    run = polytox.open_run("runs/x")
    run.metrics(threshhold=0.3)  # type: ignore[call-arg]
    run.metrics(n_bootstrap="many")  # type: ignore[arg-type]


def fine() -> None:
    polytox.evaluate(out="runs/x", samples=3, top_p=0.9, chat_template="never", lang=["en", "de"], seed=None)
    polytox.open_run("runs/x").metrics(threshold=0.3, n_bootstrap=100, attribute="insult")
