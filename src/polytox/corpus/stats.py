"""``polytox corpus stats``: the RTP §6.1 statistics of a scored corpus, read with DuckDB from the parts.

- share of documents with score >= threshold, per attribute (RTP Table 12; Figure 3's 2.1% / 4.3%), with
  a bootstrap CI. The nonparametric bootstrap of a 0/1 mean over n documents is exactly Binomial(n, p)/n,
  so the resamples are drawn that way: the same CI as resampling documents, in constant memory;
- the histogram of document toxicity (20 bins of 0.05; Figure 3 plots the counts on a log scale);
- toxic share by length bucket and by language;
- the domains holding the most toxic documents (Figure 6), and the most toxic domains by share among
  those with at least ``min_domain_docs`` documents (Figure 5).

Only documents with ``status = 'ok'`` (scored) enter the shares; every other status is counted in
``status_counts`` so the denominator is never silent. Memory: DuckDB streams the parts; the only state
that grows is one row per domain / language in the group-bys.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import duckdb
import numpy as np

from .._util.ranges import RESAMPLES, check_range
from ..constants import BOOTSTRAP_RESAMPLES, CI_LEVEL, TOXIC_THRESHOLD
from ..errors import PolytoxError
from .documents import STATUSES
from .store import BASE_FIELDS, ScoreStore

HIST_BINS = 20
LENGTH_BUCKETS: tuple[int, ...] = (256, 1_024, 4_096, 16_384)  # characters; the last bucket is open
TOP_DOMAINS = 15
MIN_DOMAIN_DOCS = 20


def bootstrap_share_ci(
    k: int, n: int, n_boot: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL, seed: int = 0
) -> list[float] | None:
    """Percentile bootstrap CI of the share k/n (resamples drawn as Binomial(n, k/n) / n)."""
    check_range("n_bootstrap", n_boot, RESAMPLES)
    if n <= 0:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n, k / n, size=n_boot) / n
    lo, hi = np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(lo), float(hi)]


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def open_parts(store: ScoreStore) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A connection with the view ``docs`` over every part, and the scorer's attribute columns."""
    files = store.part_files()
    if not files:
        raise PolytoxError(f"{store.path}: no scored parts yet; run 'polytox corpus score' first")
    con = duckdb.connect()
    con.execute(f"CREATE VIEW docs AS SELECT * FROM read_parquet({_lit(store.glob())}, union_by_name = true)")
    base = {name for name, _ in BASE_FIELDS}
    columns = [r[0] for r in con.execute("DESCRIBE docs").fetchall()]
    attributes = [c for c in columns if c not in base and not c.startswith("meta_")]
    return con, attributes


def share_block(k: int, n: int, seed: int, n_boot: int) -> dict[str, Any]:
    return {"n": n, "toxic": k, "share": k / n if n else None, "ci": bootstrap_share_ci(k, n, n_boot, seed=seed)}


def _grouped(
    con: duckdb.DuckDBPyConnection,
    key_sql: str,
    threshold: float,
    n_boot: int,
    order: str = "n DESC",
    limit: int | None = None,
    having: str = "",
    view: str = "docs",
) -> list[dict[str, Any]]:
    sql = (
        f"SELECT {key_sql} AS key, count(*) AS n, count(*) FILTER (WHERE toxicity >= $t) AS k, "
        f"avg(toxicity) AS mean FROM {view} WHERE status = 'ok' GROUP BY 1 {having} ORDER BY {order}"
        + (f" LIMIT {int(limit)}" if limit else "")
    )
    out = []
    for key, n, k, mean in con.execute(sql, {"t": threshold}).fetchall():
        block = share_block(int(k), int(n), seed=0, n_boot=n_boot)
        # rounded: DuckDB's parallel sums may differ in the last bits from one run to the next
        block["mean_toxicity"] = round(float(mean), 10) if mean is not None else None
        out.append({"key": key, **block})
    return out


def length_case(edges: Sequence[int] = LENGTH_BUCKETS) -> str:
    """A SQL CASE naming each document's length bucket (``<256``, ``256-1023``, ..., ``>=16384``)."""
    parts = [f"WHEN length_chars < {edges[0]} THEN '<{edges[0]}'"]
    for lo, hi in itertools.pairwise(edges):
        parts.append(f"WHEN length_chars < {hi} THEN '{lo}-{hi - 1}'")
    return "CASE " + " ".join(parts) + f" ELSE '>={edges[-1]}' END"


def compute_corpus_stats(
    out: str,
    threshold: float = TOXIC_THRESHOLD,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    top: int = TOP_DOMAINS,
    min_domain_docs: int = MIN_DOMAIN_DOCS,
) -> dict[str, Any]:
    """All the statistics of the scored corpus in ``out`` as one JSON-able dict."""
    store = ScoreStore(out)
    con, attributes = open_parts(store)
    if "toxicity" not in attributes:
        raise PolytoxError(f"{out}: the parts have no 'toxicity' column (attributes: {attributes})")
    status_counts = dict.fromkeys(STATUSES, 0)
    for status, n in con.execute("SELECT status, count(*) FROM docs GROUP BY 1").fetchall():
        status_counts[str(status)] = int(n)
    n_ok = status_counts["ok"]
    shares = {}
    for i, attr in enumerate(attributes):
        k = con.execute(
            f"SELECT count(*) FROM docs WHERE status = 'ok' AND {_ident(attr)} >= $t", {"t": threshold}
        ).fetchone()
        shares[attr] = share_block(int(k[0]) if k else 0, n_ok, seed=i, n_boot=n_boot)
    edges = np.linspace(0, 1, HIST_BINS + 1)
    hist = [0] * HIST_BINS
    for b, n in con.execute(
        f"SELECT least({HIST_BINS - 1}, greatest(0, floor(toxicity * {HIST_BINS})))::INT, "
        "count(*) FROM docs WHERE status = 'ok' GROUP BY 1"
    ).fetchall():
        hist[int(b)] = int(n)
    truncated = con.execute(
        "SELECT count(*) FILTER (WHERE truncated), count(*) FILTER (WHERE url IS NULL), "
        "count(*) FILTER (WHERE lang = 'und') FROM docs"
    ).fetchone() or (0, 0, 0)
    by_length = _grouped(con, length_case(), threshold, n_boot, order="min(length_chars)")
    by_lang = _grouped(con, "lang", threshold, n_boot)
    dom = "coalesce(domain, '(no url)')"
    most_toxic_docs = _grouped(con, dom, threshold, n_boot, order="k DESC, n DESC, key", limit=top)
    most_toxic_share = _grouped(
        con,
        dom,
        threshold,
        n_boot,
        order="k * 1.0 / n DESC, n DESC, key",
        limit=top,
        having=f"HAVING count(*) >= {int(min_domain_docs)}",
    )
    n_domains = con.execute("SELECT count(DISTINCT domain) FROM docs WHERE status = 'ok'").fetchone()
    manifest = store.manifest()
    return {
        "corpus": str(out),
        "scorer": manifest.get("identity", {}).get("scorer"),
        "source": manifest.get("identity", {}).get("source"),
        "settings": {
            "threshold": threshold,
            "comparison": ">=",
            "n_bootstrap": n_boot,
            "ci_level": CI_LEVEL,
            "min_domain_docs": min_domain_docs,
            "length_buckets": list(LENGTH_BUCKETS),
        },
        "n_documents": sum(status_counts.values()),
        "n_scored": n_ok,
        "status_counts": status_counts,
        "n_truncated": int(truncated[0]),
        "n_missing_url": int(truncated[1]),
        "n_unknown_language": int(truncated[2]),
        "n_domains": int(n_domains[0]) if n_domains else 0,
        "share_toxic": shares,
        "histogram": {"edges": [round(float(e), 4) for e in edges], "counts": hist},
        "by_length": by_length,
        "by_language": by_lang,
        "domains_most_toxic_documents": most_toxic_docs,
        "domains_highest_toxic_share": most_toxic_share,
    }
