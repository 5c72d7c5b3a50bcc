"""Where each file of a run directory lies (see ``polytox.store`` for the layout), and which of them exist.
Names and lists paths only: opens no file and creates nothing."""

from __future__ import annotations

from pathlib import Path

from .._util.atomic import TMP_PREFIX
from .files import slug


class RunLayout:
    """The paths of one run directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def prompts_path(self) -> Path:
        return self.path / "prompts.parquet"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.json"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def stored_anything(self) -> bool:
        """Whether the folder holds a run's prompts or parts (with or without its manifest)."""
        parts = [*self.path.glob("generations/part-*.parquet"), *self.path.glob("scores/*/part-*.parquet")]
        return self.prompts_path.exists() or bool(parts)

    def generation_part(self, shard: int) -> Path:
        return self.path / "generations" / f"part-{shard:05d}.parquet"

    def has_generations(self, shard: int) -> bool:
        return self.generation_part(shard).exists()

    def scores_dir(self, scorer_id: str) -> Path:
        return self.path / "scores" / slug(scorer_id)

    def score_part(self, scorer_id: str, shard: int) -> Path:
        return self.scores_dir(scorer_id) / f"part-{shard:05d}.parquet"

    def has_scores(self, scorer_id: str, shard: int) -> bool:
        return self.score_part(scorer_id, shard).exists()

    def scorer_ids(self) -> list[str]:
        root = self.path / "scores"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []

    def glob(self, what: str, scorer_id: str | None = None) -> str:
        """A glob DuckDB can read: ``generations`` or ``scores`` (of ``scorer_id``)."""
        if what == "generations":
            return str(self.path / "generations" / "part-*.parquet")
        if scorer_id is None:
            raise ValueError("scores need a scorer id")
        return str(self.scores_dir(scorer_id) / "part-*.parquet")

    def leftovers(self) -> list[Path]:
        """Temporary files a killed writer left behind (``.tmp-*`` in the run's folders)."""
        folders = [self.path, self.path / "generations", *self.path.glob("scores/*")]
        return sorted(p for folder in folders for p in folder.glob(f"{TMP_PREFIX}*") if p.is_file())
