"""W&B runs on a server: `wandb://entity/project/run_id` or `https://wandb.ai/entity/project/runs/id`.

Goes through `wandb.Api()` (imported lazily; the `wandb` extra) and reads the *full* history with
`run.scan_history()`, never the 500-point sampled `run.history()`, plus `run.config`. The mapping
from the API's rows to a Run is `rows_to_run`, so it can be tested without a server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError, OptionalDependencyMissing
from logscope.ingest._common import content_hash, meta_from_config, version_and_algorithm
from logscope.ingest.tables import rows_to_frame
from logscope.ingest.wandb_offline import unwrap_config
from logscope.model import ConfigSegment, Run, Source

KIND = "wandb-online"
DESCRIPTION = "W&B run on a server: wandb://entity/project/run_id or a wandb.ai run URL"

_URI = re.compile(r"^wandb://(?P<entity>[^/]+)/(?P<project>[^/]+)/(?:runs/)?(?P<run>[^/?#]+)/?$")
_URL = re.compile(
    r"^https?://[^/]+/(?P<entity>[^/]+)/(?P<project>[^/]+)/runs/(?P<run>[^/?#]+)(?:/[^?#]*)?(?:[?#].*)?$"
)


def parse_target(text: str) -> tuple[str, str, str] | None:
    """(entity, project, run_id) of a wandb:// URI or a W&B run URL, else None."""
    text = text.strip()
    # Path("wandb://a/b/c") collapses "//"; accept that spelling too
    text = re.sub(r"^(wandb|https?):/(?!/)", r"\1://", text)
    match = _URI.match(text) or _URL.match(text)
    return (match["entity"], match["project"], match["run"]) if match else None


def sniff(path: Path | str) -> bool:
    return parse_target(str(path)) is not None


def rows_to_run(
    rows: Iterable[Mapping[str, Any]],
    config: Mapping[str, Any] | None,
    meta: Mapping[str, Any],
    *,
    source: str = "",
) -> Run:
    """A Run from W&B API history rows (as `scan_history()` yields them) and `run.config`.

    Rows are dicts with `_step`, `_timestamp`, `_runtime` and the logged keys; NaN may come as a
    float or as the string "NaN"; tables/histograms are dicts and are skipped; None means the
    key was not logged in that row.
    """
    frame, used, missing = rows_to_frame(rows, none_is_nan=False)
    run_id = str(meta.get("run_id") or meta.get("id") or "wandb-run")
    run = Run(id=content_hash(KIND, source or run_id), source=Source(KIND, source or run_id))
    run.metrics = frame
    cleaned = {k: unwrap_config(v) for k, v in (config or {}).items() if k != "_wandb"}
    first = int(frame.get_column("step").min()) if frame.height else 0
    if cleaned:
        run.config_segments.append(ConfigSegment(first_step=first, config=cleaned))
    run.meta.update(meta_from_config(cleaned))
    run.meta.update(version_and_algorithm(set(run.metric_names), cleaned, before_08="0.1-0.7"))
    run.meta.update({k: v for k, v in meta.items() if v is not None})
    run.parse_stats.lines_read = used + missing
    run.parse_stats.step_lines = used
    if missing:
        run.parse_stats.notes.append(f"{missing} history rows without _step ignored")
    return run


def read(path: Path | str, *, progress: Any = None) -> list[Run]:
    target = parse_target(str(path))
    if target is None:
        raise IngestError(
            str(path), "not a W&B run reference (wandb://entity/project/run_id or a run URL)"
        )
    entity, project, run_id = target
    try:
        import wandb
    except ImportError as exc:
        raise OptionalDependencyMissing("wandb", "wandb", "Reading W&B online runs") from exc
    uri = f"wandb://{entity}/{project}/{run_id}"
    try:
        api_run = wandb.Api().run(f"{entity}/{project}/{run_id}")
        rows = api_run.scan_history(page_size=1000)
        config = dict(api_run.config)
        meta = {
            "run_id": api_run.id,
            "project": project,
            "entity": entity,
            "experiment": api_run.name,
            "state": api_run.state,
        }
        return [rows_to_run(rows, config, meta, source=uri)]
    except (OptionalDependencyMissing, IngestError):
        raise
    except Exception as exc:  # network, auth, missing run: all surface as one clear error
        raise IngestError(uri, f"cannot fetch the run from W&B: {exc}") from exc
