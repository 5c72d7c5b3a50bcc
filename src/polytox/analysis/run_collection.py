"""All selected runs in one DuckDB connection: their prompts, generations and any stored scorer.

``RunCollection(runs)`` reads every run's Parquet parts through DuckDB (``read_parquet`` over the part globs,
one ``UNION ALL`` across runs) and hands the analyses two Arrow tables:

- ``per_generation(scorer)``: one row per stored continuation, with its score or score error;
- ``per_prompt(scorer)``: one row per (run, prompt), reduced over the K continuations exactly as
  ``polytox.metrics`` does (max, mean, any >= threshold of the scores that exist; counts of failed
  generations and missing scores), plus the prompt's language, resource tier and own toxicity.

Both carry the run's model, prompt set and metadata columns, so every analysis is a grouping over them.
A run that lacks the requested scorer or attribute is left out *and named* in ``notes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .._util.lazy import lazy_getattr
from ..errors import PolytoxError
from ..langs import load_resource_tiers
from ..spec import MetricsSpec
from ..store.files import slug
from ..store.reader import RunReader
from .per_prompt_sql import per_prompt_sql, with_run_and_prompt
from .runs import RunInfo, format_params


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


RUN_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("model", pa.string()),
        ("prompt_set", pa.string()),
        ("family", pa.string()),
        ("params", pa.float64()),
        ("params_label", pa.string()),
        ("category", pa.string()),
        ("alignment", pa.string()),
    ]
)


def attribute_columns(columns: Sequence[str]) -> list[str]:
    """The attribute columns of a score part: not its keys, its error or the raw values beside them."""
    from ..types import RAW_SUFFIX

    return [c for c in columns if c not in ("prompt_id", "sample_index", "error") and not c.endswith(RAW_SUFFIX)]


@dataclass
class Selection:
    """Which run is scored by which stored scorer directory for one analysis."""

    scorer: str | None
    attribute: str
    used: dict[str, str] = field(default_factory=dict)  # run_id -> scorer directory
    notes: list[str] = field(default_factory=list)


class RunCollection:
    """The runs of an analysis, loaded once; see the module docstring."""

    def __init__(self, runs: Sequence[RunInfo], metrics: MetricsSpec | None = None, scale: str | None = None) -> None:
        if not runs:
            raise PolytoxError("no runs to analyse")
        self.runs = list(runs)
        self.by_id = {r.run_id: r for r in self.runs}
        self.metrics = metrics or MetricsSpec()
        self.scale = scale  # re-read toxicity on this named scale from the stored raw scores (``rescaled``)
        self.notes: list[str] = []
        # (kind, scorer, attribute) -> (table, selection): analyses of one report share their reads.
        self._cache: dict[tuple[str, str | None, str], tuple[pa.Table, Selection]] = {}
        self.con = duckdb.connect()
        self._rescaled_tables: list[pa.Table] = []  # registered Arrow tables must outlive their queries
        self._scores_sql: str | None = None  # the view of the last ``select``, until a query reads it
        self._load()

    # ---- loading --------------------------------------------------------------------------------
    def _load(self) -> None:
        runs_table = pa.Table.from_pylist(
            [
                {
                    "run_id": r.run_id,
                    "model": r.model,
                    "prompt_set": r.prompt_set,
                    "family": r.meta.family,
                    "params": r.meta.params,
                    "params_label": format_params(r.meta.params),
                    "category": r.meta.category,
                    "alignment": r.meta.alignment,
                }
                for r in self.runs
            ],
            schema=RUN_SCHEMA,
        )
        self.con.register("runs_arrow", runs_table)
        self.con.execute("CREATE TEMP TABLE runs AS SELECT * FROM runs_arrow")
        tiers = load_resource_tiers()
        self.con.register("tiers_arrow", pa.table({"lang": list(tiers), "tier": list(tiers.values())}))
        self.con.execute("CREATE TEMP TABLE tiers AS SELECT * FROM tiers_arrow")
        prompt_parts, gen_parts = [], []
        for r in self.runs:
            store = RunReader(r.path)
            if r.status != "complete":
                self.notes.append(
                    f"run {r.run_id} is {r.status!r} (not complete): what is stored is used, "
                    "missing continuations and scores are counted as missing"
                )
            if not store.prompts_path.exists():
                self.notes.append(f"run {r.run_id} has no prompts.parquet; left out")
                continue
            prompt_parts.append(
                f"SELECT {_lit(r.run_id)} AS run_id, prompt_id, text, lang, toxicity, bucket "
                f"FROM read_parquet({_lit(str(store.prompts_path))})"
            )
            if not list((store.path / "generations").glob("part-*.parquet")):
                self.notes.append(f"run {r.run_id} has no generations yet")
                continue
            gen_parts.append(
                f"SELECT {_lit(r.run_id)} AS run_id, prompt_id, sample_index, text, error "
                f"FROM read_parquet({_lit(store.glob('generations'))})"
            )
        if not prompt_parts:
            raise PolytoxError("none of the runs has prompts stored")
        # Views, not tables: DuckDB reads only the columns and row groups a query needs, so continuation
        # texts are read only when asked for (``texts``), and nothing is held in memory between queries.
        self.con.execute("CREATE TEMP VIEW prompts AS " + " UNION ALL ".join(prompt_parts))
        empty = (
            "SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS prompt_id, NULL::INTEGER AS sample_index, "
            "NULL::VARCHAR AS text, NULL::VARCHAR AS error WHERE false"
        )
        self.con.execute("CREATE TEMP VIEW generations AS " + " UNION ALL ".join(gen_parts or [empty]))

    # ---- scorer selection -----------------------------------------------------------------------
    def scorer_dir(self, run: RunInfo, scorer: str | None) -> str | None:
        """The scores directory of ``run`` for ``scorer`` (full id, directory name, or bare name such as
        ``svm``); None selects the run's own scorer. Returns None when the run lacks it."""
        if scorer is None:
            return (
                run.default_scorer
                if run.default_scorer in run.scorer_ids
                else (run.scorer_ids[0] if len(run.scorer_ids) == 1 else None)
            )
        wanted = slug(scorer)
        if wanted in run.scorer_ids:
            return wanted
        matches = [s for s in run.scorer_ids if s.startswith(wanted + "_") or s.split("_", 1)[0] == wanted]
        if len(matches) > 1:
            raise PolytoxError(
                f"scorer {scorer!r} is ambiguous in run {run.run_id}: {', '.join(matches)}; give the full id"
            )
        return matches[0] if matches else None

    def require_attribute(self, scorer: str | None, attribute: str) -> None:
        """One line when no run stores ``attribute`` for its scorer, naming the attributes they do store
        (a run among several that lacks it is left out and named in the notes instead)."""
        have: set[str] = set()
        for r in self.runs:
            directory = self.scorer_dir(r, scorer)
            files = sorted(RunReader(r.path).scores_dir(directory).glob("part-*.parquet")) if directory else []
            if not files:
                continue
            columns = attribute_columns(pq.read_schema(files[0]).names)
            if attribute in columns:
                return
            have.update(columns)
        if have:
            raise PolytoxError(
                f"no run has attribute {attribute!r} in its scores; they have: {', '.join(sorted(have))} "
                "(score with --scorer-opt attributes=rtp for all eight Perspective attributes)"
            )

    def select(
        self, scorer: str | None = None, attribute: str = "toxicity", run_ids: Sequence[str] | None = None
    ) -> Selection:
        """Choose each run's scores; the temp view ``sel_scores(run_id, prompt_id, sample_index, score,
        score_error)`` over them is created when a query first reads it (``_scores_view``)."""
        sel = Selection(scorer=scorer, attribute=attribute)
        parts = []
        lacking: dict[str, list[str]] = {}
        for r in self.runs:
            if run_ids is not None and r.run_id not in run_ids:
                continue
            directory = self.scorer_dir(r, scorer)
            if directory is None:
                lacking.setdefault(", ".join(r.scorer_ids) or "no scores", []).append(r.run_id)
                continue
            store = RunReader(r.path)
            first = min(store.scores_dir(directory).glob("part-*.parquet"), default=None)
            if first is None:
                sel.notes.append(f"run {r.run_id}: scores/{directory} is empty; left out")
                continue
            columns = pq.read_schema(first).names
            if attribute not in columns:
                attrs = attribute_columns(columns)
                sel.notes.append(
                    f"run {r.run_id}: scorer {directory} has no attribute {attribute!r} "
                    f"(it has: {', '.join(attrs)}); left out"
                )
                continue
            sel.used[r.run_id] = directory
            if self.scale and attribute == "toxicity":
                parts.append(self._rescaled(r, store, directory, sel))
                continue
            parts.append(
                f"SELECT {_lit(r.run_id)} AS run_id, prompt_id, sample_index, "
                f"CAST({_quote_ident(attribute)} AS DOUBLE) AS score, error AS score_error "
                f"FROM read_parquet({_lit(store.glob('scores', directory))}, union_by_name = true)"
            )
        for have, ids in lacking.items():
            shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            sel.notes.append(
                f"{len(ids)} run(s) have no scores of {scorer or 'their own scorer'} and are left "
                f"out: {shown} (they have: {have})"
            )
        if not parts:
            parts.append(
                "SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS prompt_id, NULL::INTEGER AS "
                "sample_index, NULL::DOUBLE AS score, NULL::VARCHAR AS score_error WHERE false"
            )
        self._scores_sql = "CREATE OR REPLACE TEMP VIEW sel_scores AS " + " UNION ALL ".join(parts)
        return sel

    def _scores_view(self) -> None:
        """Create the view ``sel_scores`` of the last ``select``. Binding it reads the footer of every score
        part (their columns are united by name), so it waits for a query that reads the scores: one that
        finds each run's per-prompt table kept does not."""
        if self._scores_sql is not None:
            self.con.execute(self._scores_sql)
            self._scores_sql = None

    def _rescaled(self, run: RunInfo, store: RunReader, directory: str, sel: Selection) -> str:
        """A SELECT over ``run``'s scores re-read on ``self.scale`` from their stored raw values."""
        from ..metrics import rescaled_scores
        from ..scoring.ml.rescale import run_rescale

        assert self.scale is not None
        label, fn = run_rescale(run.manifest, directory, self.scale)
        con = duckdb.connect()
        con.execute(f"CREATE VIEW prompts AS SELECT prompt_id, lang FROM read_parquet({_lit(str(store.prompts_path))})")
        table, n_without = rescaled_scores(con, store.glob("scores", directory), fn)
        name = f"rescaled_{len(self._rescaled_tables)}"
        self._rescaled_tables.append(table)
        self.con.register(name, table)
        sel.notes.append(
            f"run {run.run_id}: toxicity re-read on scale {label} from the stored raw scores"
            + (f"; {n_without} score(s) without a raw value counted as missing" if n_without else "")
        )
        return (
            f"SELECT {_lit(run.run_id)} AS run_id, prompt_id, sample_index, toxicity AS score, "
            f"error AS score_error FROM {name}"
        )

    # ---- the two tables the analyses read ---------------------------------------------------------
    def _run_filter(self, sel: Selection) -> str:
        ids = list(sel.used) or ["\x00none"]
        return "(" + ", ".join(_lit(i) for i in ids) + ")"

    def per_generation(self, scorer: str | None = None, attribute: str = "toxicity") -> tuple[pa.Table, Selection]:
        """One row per stored continuation of the runs that have the scorer (texts: see ``texts``)."""
        key = ("generation", scorer, attribute)
        if key in self._cache:
            return self._cached(key)
        sel = self.select(scorer, attribute)
        self._scores_view()
        sql = f"""
        SELECT g.run_id, r.model, r.prompt_set, r.family, r.params, r.params_label, r.category, r.alignment,
               g.prompt_id, g.sample_index, p.lang, coalesce(t.tier, 'unknown') AS tier,
               p.toxicity AS prompt_toxicity, g.error AS generation_error, s.score, s.score_error
        FROM generations g
        JOIN runs r USING (run_id)
        LEFT JOIN prompts p USING (run_id, prompt_id)
        LEFT JOIN tiers t ON t.lang = p.lang
        LEFT JOIN sel_scores s USING (run_id, prompt_id, sample_index)
        WHERE g.run_id IN {self._run_filter(sel)}
        ORDER BY g.run_id, g.prompt_id, g.sample_index
        """
        self._cache[key] = (self.con.sql(sql).to_arrow_table(), sel)
        return self._cached(key)

    def texts(self, rows: pa.Table) -> pa.Table:
        """``rows`` (run_id, prompt_id, sample_index) with their ``prompt_text`` and continuation ``text``
        appended, in the same order: read for the few continuations a listing shows."""
        keys = rows.select(["run_id", "prompt_id", "sample_index"]).append_column(
            "__pos", pa.array(range(rows.num_rows), type=pa.int64())
        )
        self.con.register("wanted_rows", keys)
        try:
            found = self.con.sql("""
                SELECT w.__pos, p.text AS prompt_text, g.text
                FROM wanted_rows w
                LEFT JOIN generations g USING (run_id, prompt_id, sample_index)
                LEFT JOIN prompts p USING (run_id, prompt_id)
                ORDER BY w.__pos
            """).to_arrow_table()
        finally:
            self.con.unregister("wanted_rows")
        return rows.append_column("prompt_text", found.column("prompt_text")).append_column(
            "text", found.column("text")
        )

    def per_prompt(self, scorer: str | None = None, attribute: str = "toxicity") -> tuple[pa.Table, Selection]:
        """One row per (run, prompt): the K-continuation reduction of ``polytox.metrics``; a prompt without
        any continuation yet (an unfinished run) has ``n_generations = 0``."""
        key = ("prompt", scorer, attribute)
        if key in self._cache:
            return self._cached(key)
        sel = self.select(scorer, attribute)
        kept = self._kept_per_prompt(sel, attribute)
        if kept is not None:
            self._cache[key] = (kept, sel)
            return self._cached(key)
        self._scores_view()
        runs = self._run_filter(sel)
        reduced = per_prompt_sql(
            generations=f"(SELECT * FROM generations WHERE run_id IN {runs})",
            scores="sel_scores",
            prompts=f"(SELECT * FROM prompts WHERE run_id IN {runs})",
            keys=("run_id", "prompt_id"),
            cmp=">=" if self.metrics.comparison == ">=" else ">",
        )
        sql = with_run_and_prompt(f"({reduced})")
        table = self.con.sql(sql, params={"threshold": self.metrics.threshold}).to_arrow_table()
        self._cache[key] = (table, sel)
        return self._cached(key)

    def _kept_per_prompt(self, sel: Selection, attribute: str) -> pa.Table | None:
        """``per_prompt`` from each run's kept one-run reduction (``kept_per_prompt``): the same rows
        without scanning every part again. None (scan them) when toxicity is re-read on another scale or a
        run lacks prompts, generations or scores."""
        from .kept_per_prompt import keepable, kept_per_prompt

        runs = [(run_id, self.by_id[run_id].path, directory) for run_id, directory in sel.used.items()]
        if self.scale is not None or not runs or not all(keepable(path, d) for _, path, d in runs):
            return None
        tables = []
        for run_id, path, directory in runs:
            one = kept_per_prompt(path, directory, attribute, self.metrics)
            tables.append(one.add_column(0, "run_id", pa.array([run_id] * one.num_rows, type=pa.string())))
        self.con.register("kept_pp", pa.concat_tables(tables))
        try:
            return self.con.sql(with_run_and_prompt("kept_pp")).to_arrow_table()
        finally:
            self.con.unregister("kept_pp")

    def _cached(self, key: tuple[str, str | None, str]) -> tuple[pa.Table, Selection]:
        table, sel = self._cache[key]
        return table, dataclasses.replace(sel, used=dict(sel.used), notes=list(sel.notes))


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# The former name of ``RunCollection`` works for one release and warns (docs/architecture.md).
__getattr__ = lazy_getattr(__name__, {}, deprecated={"Corpus": "RunCollection"})
