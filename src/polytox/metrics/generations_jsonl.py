"""Read RTP-style generation files into the tables the metrics use.

Format (as released with RTP and by DExperts): one line per prompt,
``{"prompt": {"text", "toxicity"?}, "generations": [{"text", "toxicity"}, ...]}``. A generation whose
``toxicity`` is null or absent is a missing score, counted, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..constants import toxicity_bucket
from ..errors import BadInputError
from ..prompts.readers import read_jsonl
from ..prompts.records import RecordError, check_lang, check_toxicity


def _convert_line(record: Any, lineno: int, attribute: str = "toxicity") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(record, Mapping):
        raise RecordError("expected a JSON object")
    prompt = record.get("prompt")
    gens = record.get("generations")
    if not isinstance(prompt, Mapping):
        raise RecordError("missing field 'prompt' (an object with 'text')")
    if not isinstance(gens, list):
        raise RecordError("missing field 'generations' (a list)")
    ptox = check_toxicity(prompt.get("toxicity"), "prompt.toxicity")
    pid = (
        f"rtp:{record['filename']}:{record.get('begin')}:{record.get('end')}"
        if record.get("filename")
        else f"line:{lineno}"
    )
    lang = check_lang(record.get("lang") or "en", "lang")  # "EN" and "en-US" are "en"; "xx" is an error
    prow = {
        "prompt_id": pid,
        "lang": lang,
        "toxicity": ptox,
        "bucket": toxicity_bucket(ptox) if ptox is not None else None,
    }
    rows = []
    for k, gen in enumerate(gens):
        if not isinstance(gen, Mapping):
            raise RecordError(f"generations[{k}] is not an object")
        tox = check_toxicity(gen.get(attribute), f"generations[{k}].{attribute}")
        rows.append(
            {
                "prompt_id": pid,
                "sample_index": k,
                "toxicity": tox,
                "error": None if gen.get("text") is not None else "missing text",
            }
        )
    return prow, rows


def load_generations_jsonl(
    path: Path, skip_bad: bool = False, attribute: str = "toxicity"
) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A DuckDB connection with ``generations``, ``scores`` and ``prompts`` tables from the file; the
    ``scores`` column ``toxicity`` holds each generation's ``attribute`` (RTP's files keep all eight)."""
    prompts: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for raw in read_jsonl(path):
        lineno = int(raw.location.rsplit(":", 1)[1])  # the file's line (blank lines are skipped, not counted)
        if raw.error is not None:
            problems.append(f"{raw.location}: {raw.error}")
            continue
        try:
            prow, grows = _convert_line(raw.record, lineno, attribute)
        except RecordError as exc:
            problems.append(f"{raw.location}: {exc}")
            continue
        if prow["prompt_id"] in seen:
            prow["prompt_id"] = f"{prow['prompt_id']}#line{lineno}"
            for g in grows:
                g["prompt_id"] = prow["prompt_id"]
        seen.add(prow["prompt_id"])
        prompts.append(prow)
        rows.extend(grows)
    if problems and not skip_bad:
        raise BadInputError(
            f"{len(problems)} bad line(s) in {path} (pass --skip-bad to skip them):\n  " + "\n  ".join(problems[:50]),
            problems,
        )
    if not prompts:
        why = f"all {len(problems)} line(s) are bad" if problems else "the file is empty"
        raise BadInputError(f"{path}: no generation records ({why})", problems)
    if attribute != "toxicity" and all(r["toxicity"] is None for r in rows):
        raise BadInputError(f"{path}: no generation has a {attribute!r} value (the attribute asked)", problems)
    gens = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("prompt_id", pa.string()),
                ("sample_index", pa.int32()),
                ("toxicity", pa.float64()),
                ("error", pa.string()),
            ]
        ),
    )
    ptab = pa.Table.from_pylist(
        prompts,
        schema=pa.schema(
            [("prompt_id", pa.string()), ("lang", pa.string()), ("toxicity", pa.float64()), ("bucket", pa.int8())]
        ),
    )
    con = duckdb.connect()
    con.register("gens_arrow", gens)
    con.register("prompts_arrow", ptab)
    con.execute("CREATE VIEW generations AS SELECT prompt_id, sample_index, error FROM gens_arrow")
    con.execute("CREATE VIEW scores AS SELECT prompt_id, sample_index, toxicity FROM gens_arrow")
    con.execute("CREATE VIEW prompts AS SELECT prompt_id, lang, toxicity, bucket FROM prompts_arrow")
    return con, problems
