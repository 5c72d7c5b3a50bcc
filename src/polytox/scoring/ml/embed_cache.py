"""A persistent cache of text embeddings: (model key, layer, text hash) -> float16 vector, in SQLite.

Hidden-state extraction is the slow part of training and scoring on a CPU; with this cache a retrain (or a
rescore of the same texts) costs only the head. One row per layer, so an extraction of layers (6, 9) also
serves a later head that uses layer 6 alone. WAL mode makes it safe for parallel processes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..._util.paths import default_cache_dir
from ..._util.sqlite import open_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
  model TEXT NOT NULL,
  layer INTEGER NOT NULL,
  text_sha256 TEXT NOT NULL,
  dim INTEGER NOT NULL,
  vec BLOB NOT NULL,
  PRIMARY KEY (model, layer, text_sha256)
) WITHOUT ROWID;
"""


def default_embedding_cache_path() -> Path:
    return default_cache_dir() / "embeddings.sqlite"


class EmbeddingCache:
    """Get/put float16 vectors by (model key, layer, text hash); thread-safe; one SQLite file."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_embedding_cache_path()
        self._lock = threading.Lock()
        self._db = open_wal(self.path, SCHEMA)

    def get_many(self, model: str, layer: int, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT text_sha256, dim, vec FROM embeddings WHERE model = ? AND layer = ? "
                    f"AND text_sha256 IN ({marks})",
                    [model, layer, *chunk],
                ).fetchall()
                for sha, dim, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float16)
                    if vec.shape[0] == dim:
                        found[sha] = vec
        return found

    def put_many(self, model: str, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """Store (layer, text hash, vector) rows in one transaction."""
        data = [
            (model, int(layer), sha, int(vec.shape[0]), np.asarray(vec, dtype=np.float16).tobytes())
            for layer, sha, vec in rows
        ]
        if not data:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?,?)", data)
            self._db.execute("COMMIT")

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return int(self._db.execute("SELECT count(*) FROM embeddings").fetchone()[0])
            return int(self._db.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
