"""``polytox.evaluate``: ``polytox eval`` as a function, its keyword arguments named as the command's flags.

The arguments become the same ``argparse.Namespace`` the command builds and go through the command's own
spec reader (``cli.eval_cmd.spec_and_executor``): a config file, ``--retry-failed`` without spec flags (the
stored spec) and ``--generations-from`` (the source run's spec) behave as they do there, and a bad value is
the same error. An ``EvalSpec`` is still accepted in place of the keywords.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PolytoxError
from ..executors import ExecutorConfig
from ..spec import FLAT_KEYS, EvalSpec

if TYPE_CHECKING:
    from ..runner import RunResult

Options = Mapping[str, Any] | Sequence[str]


def _check_keys(options: Mapping[str, Any], known: set[str]) -> None:
    """Refuse a keyword that is not a flag of ``polytox eval``, naming the closest one."""
    unknown = sorted(set(options) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PolytoxError(f"evaluate() has no option {unknown[0]!r}{hint}; its options: {', '.join(sorted(known))}")


def _namespace(
    given: Mapping[str, Any],
    config: str | Path | None,
    out: str | Path | None,
    retry_failed: bool,
    generations_from: str | Path | None,
) -> argparse.Namespace:
    """The ``eval`` arguments the keyword options stand for, as the CLI's parser would give them."""
    from ..cli.eval_cmd import EXECUTOR_KEYS, resolve_out

    values = {key: given.get(key) for key in (*FLAT_KEYS, *EXECUTOR_KEYS)}
    args = argparse.Namespace(
        **values,
        config=str(config) if config is not None else None,
        out=str(out) if out is not None else None,
        retry_failed=retry_failed or None,
        generations_from=str(generations_from) if generations_from is not None else None,
    )
    resolve_out(args)
    return args


def evaluate(
    spec: EvalSpec | None = None,
    out: str | Path | None = None,
    *,
    model: str | None = None,
    prompts: str | None = None,
    samples: int | None = None,
    limit: int | None = None,
    lang: str | Sequence[str] | None = None,
    scorer: str | None = None,
    scorer_opt: Options | None = None,
    preset: str | None = None,
    max_new_tokens: int | None = None,
    backend: str | None = None,
    model_opt: Options | None = None,
    seed: int | None = None,
    config: str | Path | None = None,
    executor: str | ExecutorConfig | None = None,
    retry_failed: bool = False,
    generations_from: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    **options: Any,
) -> RunResult:
    """Run or resume an evaluation (``polytox eval``): generate K continuations per prompt, score them, compute
    the metrics; rerunning with the same ``out`` resumes.

    Args:
        spec: a complete ``EvalSpec`` instead of the keyword options (not both).
        out: the run directory (``--out``); required.
        model: model id or path; ``"fake"`` for a dry run; default: the embedded SmolLM2 (``--model``).
        prompts: ``"demo"``, a JSONL/CSV/Parquet file or folder, or a Hugging Face dataset id (``--prompts``).
        samples: continuations per prompt, K (``--samples``).
        limit: use the first N selected prompts (``--limit``).
        lang: keep only these languages: a code, a comma list or a list (``--lang``).
        scorer: scorer name; default ``"default"`` (``--scorer``).
        scorer_opt: scorer options, a mapping or ``KEY=VALUE`` strings (``--scorer-opt``).
        preset: ``"rtp"`` or ``"ptp"``, the paper's sampling settings (``--preset``).
        max_new_tokens: tokens per continuation (``--max-new-tokens``).
        backend: generation backend; default: inferred from ``model`` (``--backend``).
        model_opt: backend options, a mapping or ``KEY=VALUE`` strings (``--model-opt``).
        seed: the run seed (``--seed``).
        config: a YAML file of the same keys; keyword options override it (``--config``).
        executor: ``"pipelined"``, ``"serial"`` or ``"ray"``, or an ``ExecutorConfig`` (``--executor``).
        retry_failed: regenerate the failed samples of ``out`` with their original seeds (``--retry-failed``).
        generations_from: score this run's stored generations instead of generating (``--generations-from``).
        progress: called as ``progress(stage, done, total)`` while the run works.
        **options: any other flag of ``polytox eval``, by its name with ``_`` for ``-`` (``temperature``,
            ``top_p``, ``top_k``, ``batch_size``, ``threshold``, ``n_bootstrap``, ``shard_size``, ``detox``,
            ``workers``...).

    Returns:
        The run's ``RunResult``: ``.metrics`` (what ``polytox eval --json`` prints), ``.path``, ``.spec``,
        ``.failures``.

    Raises:
        PolytoxError: a bad argument or input, with the message ``polytox eval`` prints.
    """
    from ..cli.eval_cmd import EXECUTOR_KEYS, executor_config, spec_and_executor
    from ..runner import evaluate as run_evaluation

    if spec is not None and not isinstance(spec, EvalSpec):
        raise PolytoxError(
            f"evaluate() takes an EvalSpec or keyword options, got {type(spec).__name__} {spec!r} "
            "as the spec; give the run directory as out=..."
        )
    _check_keys(options, set(FLAT_KEYS) | set(EXECUTOR_KEYS))
    named = {
        "model": model,
        "prompts": prompts,
        "samples": samples,
        "limit": limit,
        "lang": lang,
        "scorer": scorer,
        "scorer_opt": scorer_opt,
        "preset": preset,
        "max_new_tokens": max_new_tokens,
        "backend": backend,
        "model_opt": model_opt,
        "seed": seed,
    }
    given = {**options, **{k: v for k, v in named.items() if v is not None}}
    config_obj = executor if isinstance(executor, ExecutorConfig) else None
    if config_obj is None and executor is not None:
        given["executor"] = executor
    args = _namespace(given, config, out, retry_failed, generations_from)
    if spec is not None:
        if config is not None or any(given.get(k) is not None for k in FLAT_KEYS):
            raise PolytoxError("evaluate() takes a spec or keyword options (and config), not both")
        run_spec, executor_cfg = spec.validate(), executor_config({}, args)
    else:
        run_spec, executor_cfg = spec_and_executor(args)
    return run_evaluation(
        run_spec,
        args.out,
        progress=progress,
        executor=config_obj or executor_cfg,
        retry_failed=retry_failed,
        generations_from=args.generations_from,
    )
