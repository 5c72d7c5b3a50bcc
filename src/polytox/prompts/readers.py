"""Read raw records from JSONL, CSV and Parquet, each tagged with where it came from.

Readers never raise on a bad record: they yield ``RawRecord(location, record=None, error=...)`` so the
caller can report ``file:line: reason`` and decide whether to stop or skip.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util import jsondepth
from ..errors import PolytoxError


@dataclass(frozen=True, slots=True)
class RawRecord:
    location: str  # "path:line" (JSONL/CSV) or "path:row N" (Parquet)
    record: Any = None
    error: str | None = None
    text_cells: bool = False  # a CSV row: every cell is text, its numeric columns are read as numbers later


def file_kind(path: Path) -> str:
    name = path.name.lower()
    for suffix, kind in (
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "jsonl"),
        (".csv", "csv"),
        (".parquet", "parquet"),
        (".pq", "parquet"),
    ):
        if name.endswith(suffix) or name.endswith(suffix + ".gz"):
            return kind
    raise PolytoxError(f"{path}: unknown file type; expected .jsonl, .json (JSON Lines), .csv or .parquet")


def _open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def read_jsonl(path: Path) -> Iterator[RawRecord]:
    """One JSON object per line; blank lines are skipped; invalid UTF-8 or JSON is reported per line."""
    with _open_binary(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            loc = f"{path}:{lineno}"
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RawRecord(loc, error=f"invalid UTF-8 at byte {exc.start}")
                continue
            try:
                yield RawRecord(loc, record=jsondepth.loads(line))
            except json.JSONDecodeError as exc:
                yield RawRecord(loc, error=f"malformed JSON: {exc.msg} (column {exc.colno})")
            except jsondepth.TooDeepError as exc:
                yield RawRecord(loc, error=f"malformed JSON: {exc}")


_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _has_undecodable(row: dict[str, Any]) -> bool:
    """True when a cell holds bytes that were not UTF-8 (decoded as ``surrogateescape`` U+DC80..U+DCFF)."""
    return any(isinstance(v, str) and _UNDECODABLE.search(v) for v in row.values())


def read_csv(path: Path, *, name_column: bool = False) -> Iterator[RawRecord]:
    """A header row, then one record per row; empty cells are treated as missing.

    Invalid UTF-8 is reported per row (the file is decoded with ``surrogateescape`` and rows holding an
    undecodable byte are rejected), so one bad row does not make the rest of the file unreadable.
    ``name_column``: that error carries its code and names the column (``INVALID_UTF8: invalid UTF-8 in
    column 'text'``), as the rows of ``polytox score`` report it.
    """
    with _open_binary(path) as fb:
        data = fb.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.decode("utf-8", "surrogateescape")
    # strict: a quote left open is "unexpected end of data" at the row where it opened, not every line to
    # the end of the file merged into one record
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    if reader.fieldnames is not None and _has_undecodable(
        dict.fromkeys(reader.fieldnames, "") | {"": "".join(reader.fieldnames)}
    ):
        yield RawRecord(f"{path}:1", error="invalid UTF-8 in the header row; the file cannot be read")
        return
    repeated = [name for name, n in Counter(reader.fieldnames or []).items() if n > 1]
    if repeated:  # csv.DictReader would keep the last column of the name silently
        yield RawRecord(
            f"{path}:1",
            error=f"malformed CSV: column {repeated[0]!r} appears twice in the header; the file cannot be read",
        )
        return
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield RawRecord(f"{path}:{start}", error=f"malformed CSV: {exc}")
            return
        if None in row:
            yield RawRecord(f"{path}:{start}", error="malformed CSV: more fields than the header")
            continue
        bad = [k for k, v in row.items() if isinstance(v, str) and _UNDECODABLE.search(v)]
        if bad:
            error = f"INVALID_UTF8: invalid UTF-8 in column {bad[0]!r}" if name_column else "invalid UTF-8 in this row"
            yield RawRecord(f"{path}:{start}", error=error)
            continue
        yield RawRecord(
            f"{path}:{start}", record={k: (v if v != "" else None) for k, v in row.items()}, text_cells=True
        )


def read_parquet(path: Path) -> Iterator[RawRecord]:
    """One record per row; a file Arrow cannot read is reported as one bad record, not a traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = 0
    try:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=8192):
            for rec in batch.to_pylist():
                row += 1
                yield RawRecord(f"{path}:row {row}", record=rec)
    except (pa.ArrowException, OSError) as exc:
        where = f"row {row + 1}" if row else "file"
        yield RawRecord(f"{path}:{where}", error=f"cannot read Parquet: {exc}")


def supported_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that a reader here understands, sorted by name (hidden files left out)."""
    out = []
    for file in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        try:
            file_kind(file)
        except PolytoxError:
            continue
        out.append(file)
    return out


def read_file(path: Path, *, name_column: bool = False) -> Iterator[RawRecord]:
    """Records of one JSONL, CSV or Parquet file, by its name (``name_column``: see ``read_csv``)."""
    kind = file_kind(path)
    if kind == "jsonl":
        return read_jsonl(path)
    if kind == "csv":
        return read_csv(path, name_column=name_column)
    return read_parquet(path)


def read_records(path: Path) -> Iterator[RawRecord]:
    """Records of a file or of every supported file in a directory (sorted, so order is stable)."""
    if path.is_dir():
        for file in supported_files(path):
            yield from read_records(file)
        return
    if not path.exists():
        raise PolytoxError(f"prompt file not found: {path}")
    yield from read_file(path)
