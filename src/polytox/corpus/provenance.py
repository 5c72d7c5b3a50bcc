"""``polytox corpus provenance``: join documents to user label tables (RTP §6.2, Figures 4 and 8-10).

A label table maps a key to a label:

- a CSV with a header: the key column (``--key-column``, default the first) and the label column
  (``--label-column``, default the second), e.g. ``domain,reliability`` rows of Baly et al. (2018)'s
  news-factuality ratings (``low`` / ``mixed`` / ``high``);
- a one-column CSV or a ``.txt`` list (one key per line, ``#`` comments): every listed key gets the
  label ``listed``, e.g. banned or quarantined subreddits.

The key is either ``domain`` (the document URL's registrable domain; table cells holding URLs, hosts or
domains are normalised with the same Public Suffix List, so ``https://www.bbc.co.uk/news`` matches a
document from ``news.bbc.co.uk``), or a metadata column kept at scoring time (``--keep subreddit``),
compared case-insensitively. Malformed rows (missing key or label, extra fields, a key that is no domain,
a key given two different labels) are skipped and each reported as ``file:line: reason``; the first
label of a key wins.

Reported: toxic share per label with bootstrap CIs (unlabelled documents as ``(unlabelled)``), coverage
(scored documents that matched a label), and, with ``--order low,mixed,high``, the Spearman correlation
between the ordinal label of a key and that key's toxic share, over keys with at least ``min_docs``
scored documents (RTP Figure 4: rho = -0.35 between news reliability and toxic share).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..constants import BOOTSTRAP_RESAMPLES, TOXIC_THRESHOLD
from ..errors import PolytoxError, require
from ..prompts.readers import read_csv
from .domains import normalize_key
from .stats import _grouped, open_parts
from .store import ScoreStore, meta_column

LISTED = "listed"
UNLABELLED = "(unlabelled)"
MIN_KEY_DOCS = 10


@dataclass
class LabelTable:
    """Normalised key -> label, with every malformed row as ``file:line: reason``."""

    path: str
    labels: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    problems: list[str] = field(default_factory=list)


def _normalise(value: str, key: str) -> str | None:
    text = value.strip()
    if key == "domain":
        return normalize_key(text)
    return text.lower() or None


def _add(table: LabelTable, location: str, raw_key: Any, label: Any, key: str) -> None:
    table.rows += 1
    if raw_key is None or not str(raw_key).strip():
        table.problems.append(f"{location}: missing key")
        return
    if label is None or not str(label).strip():
        table.problems.append(f"{location}: missing label for {raw_key!r}")
        return
    norm = _normalise(str(raw_key), key)
    if norm is None:
        table.problems.append(f"{location}: {raw_key!r} is not a domain (no registrable domain)")
        return
    label = str(label).strip().lower()
    old = table.labels.get(norm)
    if old is not None and old != label:
        table.problems.append(f"{location}: {raw_key!r} ({norm}) already labelled {old!r}; {label!r} ignored")
        return
    table.labels[norm] = label


def load_labels(
    path: str | Path, key: str = "domain", key_column: str | None = None, label_column: str | None = None
) -> LabelTable:
    """Read a label table (see the module docstring); never raises on a malformed row."""
    path = Path(path)
    if not path.exists():
        raise PolytoxError(f"label table not found: {path}")
    table = LabelTable(path=str(path))
    if path.suffix == ".txt":
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            text = line.split("#", 1)[0].strip()
            if text:
                _add(table, f"{path}:{lineno}", text, LISTED, key)
        return table
    columns: list[str] | None = None
    for raw in read_csv(path):
        if raw.error is not None:
            table.rows += 1
            table.problems.append(f"{raw.location}: {raw.error}")
            continue
        record = raw.record
        if columns is None:
            columns = list(record)
            for wanted in (key_column, label_column):
                if wanted is not None and wanted not in columns:
                    raise PolytoxError(f"{path}: no column {wanted!r} (columns: {', '.join(columns)})")
        k_col = key_column or columns[0]
        l_col = label_column or (columns[1] if len(columns) > 1 else None)
        _add(table, raw.location, record.get(k_col), record.get(l_col) if l_col else LISTED, key)
    return table


def key_sql(key: str, columns: list[str]) -> str:
    """The SQL expression of a document's key (``domain`` or a kept metadata column)."""
    if key == "domain":
        return "domain"
    column = meta_column(key)
    if column not in columns:
        kept = [c[5:] for c in columns if c.startswith("meta_")]
        raise PolytoxError(
            f"the scored corpus has no metadata column {key!r} (kept: {', '.join(kept) or 'none'}); "
            f"rescore with --keep {key}"
        )
    return f'lower(trim("{column}"))'


def provenance(
    out: str,
    labels: LabelTable,
    key: str = "domain",
    order: list[str] | None = None,
    threshold: float = TOXIC_THRESHOLD,
    min_docs: int = MIN_KEY_DOCS,
    n_boot: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, Any]:
    """Toxic share per label, coverage and (with ``order``) Spearman rho; see the module docstring."""
    con, _ = open_parts(ScoreStore(out))
    columns = [r[0] for r in con.execute("DESCRIBE docs").fetchall()]
    expr = key_sql(key, columns)
    con.register(
        "labels_arrow",
        pa.table(
            {
                "lkey": pa.array(list(labels.labels), type=pa.string()),
                "label": pa.array(list(labels.labels.values()), type=pa.string()),
            }
        ),
    )
    con.execute(f"CREATE VIEW keyed AS SELECT d.*, {expr} AS jkey FROM docs d")
    con.execute("CREATE VIEW docs_l AS SELECT k.*, l.label FROM keyed k LEFT JOIN labels_arrow l ON k.jkey = l.lkey")
    by_label = _grouped(con, f"coalesce(label, '{UNLABELLED}')", threshold, n_boot, view="docs_l")
    scored, matched = con.execute("SELECT count(*), count(label) FROM docs_l WHERE status = 'ok'").fetchone() or (0, 0)
    all_docs, all_matched = con.execute("SELECT count(*), count(label) FROM docs_l").fetchone() or (0, 0)
    result: dict[str, Any] = {
        "corpus": out,
        "key": key,
        "labels_file": labels.path,
        "label_table": {"rows": labels.rows, "keys": len(labels.labels), "problems": labels.problems},
        "settings": {"threshold": threshold, "min_docs": min_docs, "n_bootstrap": n_boot},
        "coverage": {
            "scored": int(scored),
            "matched": int(matched),
            "share": int(matched) / int(scored) if scored else None,
            "documents": int(all_docs),
            "documents_matched": int(all_matched),
        },
        "by_label": by_label,
    }
    if order:
        result["spearman"] = spearman(con, [o.strip().lower() for o in order], threshold, min_docs)
    return result


def spearman(con: Any, order: list[str], threshold: float, min_docs: int) -> dict[str, Any] | None:
    """Spearman rho between the ordinal label of each key and its toxic share (keys with >= min_docs)."""
    stats = require("scipy.stats", "report", "scipy")
    rows = con.execute(
        "SELECT jkey, any_value(label), count(*), count(*) FILTER (WHERE toxicity >= $t) "
        "FROM docs_l WHERE status = 'ok' AND label IS NOT NULL GROUP BY jkey HAVING count(*) >= $m",
        {"t": threshold, "m": min_docs},
    ).fetchall()
    rank = {label: i for i, label in enumerate(order)}
    points = [(rank[label], k / n) for _, label, n, k in rows if label in rank]
    out: dict[str, Any] = {"order": order, "min_docs": min_docs, "n_keys": len(points), "rho": None, "p_value": None}
    if len(points) >= 3 and len({p[0] for p in points}) > 1 and len({p[1] for p in points}) > 1:
        res = stats.spearmanr([p[0] for p in points], [p[1] for p in points])
        out["rho"], out["p_value"] = float(res.statistic), float(res.pvalue)
    else:
        out["note"] = "fewer than 3 keys with two distinct labels and shares: rho is undefined"
    return out
