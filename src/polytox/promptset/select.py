"""Seeded stratified sampling: N units per language and equal-width toxicity bin, with a shortfall report.

The sample is a bottom-k sample: every unit gets the key ``md5("<seed>:<id>")`` and each (language, bin)
keeps its N smallest keys, natural units before machine-translated ones (translations only fill gaps,
PTP §3.2). It is uniform, reproducible from the seed, independent of shard order and of how often the
build was resumed, and runs in DuckDB over the Parquet parts, which spills to disk: memory does not grow
with the corpus. A unit id seen twice (the same document read twice) is kept once, its first occurrence.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from .._util.atomic import atomic_write
from ..errors import PolytoxError

N_BINS = 4


@dataclass
class Shortfall:
    """Per (language, bin): what was asked, what existed, what was taken."""

    requested: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0

    @property
    def short(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["shortfall"] > 0]

    def selected_by_lang(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.rows:
            out[r["lang"]] += r["selected"]
        return dict(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested_per_bin": self.requested,
            "duplicates_dropped": self.duplicates,
            "bins": self.rows,
            "short": [
                f"{r['lang']} bin {r['bucket']}: {r['available']} available for {self.requested}" for r in self.short
            ],
        }


def _sql_list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def sample_key(seed: int, unit_id: str, salt: str = "") -> str:
    """The sort key of a unit in a seeded sample (the same md5 the DuckDB query computes)."""
    return hashlib.md5(f"{seed}:{salt}{unit_id}".encode()).hexdigest()


def stratified_select(
    parts: Sequence[Path], out: Path, per_bin: int, seed: int, langs: Sequence[str] = (), temp_dir: Path | None = None
) -> Shortfall:
    """Write the sample to ``out`` (Parquet, ordered by language, bin, rank) and return the report."""
    if not parts:
        raise PolytoxError("no scored units to sample from: every document was rejected (see report.md)")
    con = duckdb.connect()
    try:
        if temp_dir is not None:
            temp_dir.mkdir(parents=True, exist_ok=True)
            con.execute(f"SET temp_directory = '{str(temp_dir).replace(chr(39), chr(39) * 2)}'")
        lang_filter = ""
        if langs:
            lang_filter = "AND lang IN (" + ", ".join("'" + x.replace("'", "''") + "'" for x in langs) + ")"
        con.execute(f"""
            CREATE TEMP TABLE units AS
            SELECT id, lang, bucket, translated_from IS NOT NULL AS mt, filename AS _file, file_row_number AS _row,
                   md5('{int(seed)}:' || id) AS _key
            FROM read_parquet({_sql_list(parts)}, filename = true, file_row_number = true)
            WHERE bucket IS NOT NULL {lang_filter}
        """)
        con.execute("""
            CREATE TEMP TABLE firsts AS
            SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY _file, _row) AS _occ FROM units)
        """)
        duplicates = int(con.execute("SELECT count(*) FROM firsts WHERE _occ > 1").fetchall()[0][0])
        con.execute(f"""
            CREATE TEMP TABLE chosen AS
            SELECT _file, _row, lang, bucket, rank FROM (
              SELECT *, row_number() OVER (PARTITION BY lang, bucket ORDER BY mt, _key) AS rank
              FROM firsts WHERE _occ = 1)
            WHERE rank <= {int(per_bin)}
        """)
        counts = con.execute("""
            SELECT f.lang, f.bucket, count(*) AS available, count(*) FILTER (WHERE NOT f.mt) AS natural,
                   count(*) FILTER (WHERE f.mt) AS translated
            FROM firsts f WHERE f._occ = 1 GROUP BY f.lang, f.bucket
        """).fetchall()
        chosen = dict(
            ((lang, int(b)), (int(n), int(mt)))
            for lang, b, n, mt in con.execute("""
            SELECT c.lang, c.bucket, count(*), count(*) FILTER (WHERE f.mt)
            FROM chosen c JOIN firsts f USING (_file, _row) GROUP BY c.lang, c.bucket
        """).fetchall()
        )
        available = {(lang, int(b)): (int(n), int(nat), int(mt)) for lang, b, n, nat, mt in counts}
        present = sorted({lang for lang, _ in available} | set(langs))
        rows = []
        for lang in present:
            for b in range(N_BINS):
                n, nat, mt = available.get((lang, b), (0, 0, 0))
                sel, sel_mt = chosen.get((lang, b), (0, 0))
                rows.append(
                    {
                        "lang": lang,
                        "bucket": b,
                        "requested": per_bin,
                        "available": n,
                        "natural": nat,
                        "translated": mt,
                        "selected": sel,
                        "selected_translated": sel_mt,
                        "shortfall": max(0, per_bin - n),
                    }
                )

        def copy(tmp: str) -> None:
            con.execute(f"""
                COPY (
                  SELECT d.* EXCLUDE (filename, file_row_number), c.rank
                  FROM read_parquet({_sql_list(parts)}, filename = true, file_row_number = true) d
                  JOIN chosen c ON c._file = d.filename AND c._row = d.file_row_number
                  ORDER BY c.lang, c.bucket, c.rank
                ) TO '{tmp.replace(chr(39), chr(39) * 2)}' (FORMAT parquet, COMPRESSION zstd)
            """)

        atomic_write(out, copy)
        return Shortfall(requested=per_bin, rows=rows, duplicates=duplicates)
    finally:
        con.close()


def small_subset(units: Sequence[tuple[str, str, int]], per_lang: int, seed: int) -> set[str]:
    """A seeded, stratified subset of ``per_lang`` units per language (PTP_SMALL-like).

    ``units`` are (id, lang, bucket). Each bin gets ``per_lang / 4`` (the remainder to the lowest bins);
    a bin with fewer units gives its unused quota to the others, taken in key order, so a language
    with at least ``per_lang`` units always gets exactly ``per_lang``.
    """
    by_lang: dict[str, dict[int, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for unit_id, lang, bucket in units:
        by_lang[lang][bucket].append((sample_key(seed, unit_id, "small:"), unit_id))
    keep: set[str] = set()
    for bins in by_lang.values():
        leftovers: list[tuple[str, str]] = []
        taken = 0
        for b in range(N_BINS):
            quota = per_lang // N_BINS + (1 if b < per_lang % N_BINS else 0)
            ranked = sorted(bins.get(b, []))
            keep.update(unit_id for _, unit_id in ranked[:quota])
            taken += min(quota, len(ranked))
            leftovers.extend(ranked[quota:])
        keep.update(unit_id for _, unit_id in sorted(leftovers)[: max(0, per_lang - taken)])
    return keep
