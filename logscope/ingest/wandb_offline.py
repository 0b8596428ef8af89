"""W&B offline runs: the `.wandb` transaction log, read without the wandb package.

Framing (verified on files from wandb 0.16.6, 0.22.3, 0.31.0; domain/verl_formats.md §4.3):
a 7-byte header `<4sHB` = `b":W&B"`, 0xBEE1, version 0; then LevelDB-log style 32 KiB blocks of
records with a 7-byte header `<IHB` (crc32, length, type FULL/FIRST/MIDDLE/LAST), the CRC being
`zlib.crc32(payload, zlib.crc32(bytes([type])))`. Each reassembled payload is a wandb `Record`
protobuf, parsed here with a minimal schema built at run time (field numbers from wandb's
`wandb_internal.proto`), so reading needs only `protobuf` and never `import wandb` (slow, and it
replaces `sys.stdout.write`).

A bad CRC drops that record and reading resumes at the next block; a run still being written
(partial last record, no exit record) is read up to the last whole record. Both are counted.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from functools import cache
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import (
    meta_from_config,
    metrics_frame,
    new_run,
    read_bytes,
    to_float,
    version_and_algorithm,
)
from logscope.model import ConfigSegment, Event, Run, Source
from logscope.verl_config import set_path

KIND = "wandb-offline"
DESCRIPTION = "W&B offline/online run folder, a wandb/ directory, or a run-*.wandb file"

_IDENT = b":W&B"
_MAGIC = 0xBEE1
_VERSION = 0
_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_SEED = {t: zlib.crc32(bytes([t])) for t in (_FULL, _FIRST, _MIDDLE, _LAST)}
_RUN_PREFIXES = ("offline-run-", "run-")
PARSED_STEP_LINES = 50  # printed step lines parsed in full (their format dates the verl version)
_CLEAN_STEP = re.compile(r"^step:([0-9]{1,18}) - [^ :]+:")
SUMMARY_TAIL = 256  # summary records read for the run summary (see _summary)

# ---- minimal Record schema ------------------------------------------------------------------

# The fields read, as wandb_internal.proto declares them: `[repeated] type name = number`, a
# capitalised type being a message of this schema
_MESSAGES: dict[str, tuple[str, ...]] = {
    "Timestamp": ("int64 seconds = 1", "int32 nanos = 2"),
    "Item": ("string key = 1", "repeated string nested_key = 2", "string value_json = 16"),
    "HistoryStep": ("int64 num = 1",),
    "HistoryRecord": ("repeated Item item = 1", "HistoryStep step = 2"),
    "ItemsRecord": ("repeated Item update = 1", "repeated Item remove = 2"),
    "OutputRecord": ("int32 output_type = 1", "Timestamp timestamp = 2", "string line = 3"),
    "RunRecord": (
        "string run_id = 1",
        "string entity = 2",
        "string project = 3",
        "ItemsRecord config = 4",
        "ItemsRecord summary = 5",
        "string run_group = 6",
        "string job_type = 7",
        "string display_name = 8",
        "repeated string tags = 10",
        "string host = 13",
        "int64 starting_step = 14",
        "Timestamp start_time = 17",
        "bool resumed = 18",
    ),
    "ExitRecord": ("int32 exit_code = 1", "int32 runtime = 2", "bool not_complete = 3"),
    "VersionInfo": ("string producer = 1", "string min_consumer = 2"),
    "HeaderRecord": ("VersionInfo version_info = 1",),
    "Empty": (),
    "Record": (
        "int64 num = 1",
        "HistoryRecord history = 2",
        "bytes summary = 3",  # raw: merged once at the end (see _summary)
        "OutputRecord output = 4",
        "ItemsRecord config = 5",
        "OutputRecord output_raw = 13",
        "RunRecord run = 17",
        "ExitRecord exit = 18",
        "Empty final = 20",
        "HeaderRecord header = 21",
        "Empty footer = 22",
    ),
}
_ONEOF = {"history", "summary", "output", "config", "output_raw", "run", "exit", "final",
          "header", "footer"}  # fmt: skip
_PACKAGE = "logscope_wandb_min"


@cache
def _record_class() -> Any:
    """The `Record` message class of the minimal schema (built once)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    Field = descriptor_pb2.FieldDescriptorProto

    file = descriptor_pb2.FileDescriptorProto(
        name="logscope_wandb_min.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        if name == "Record":
            message.oneof_decl.add(name="record_type")
        for spec in fields:
            *repeated, ftype, fname, _, number = spec.split()
            field = message.field.add(name=fname, number=int(number))
            field.label = Field.LABEL_REPEATED if repeated else Field.LABEL_OPTIONAL
            if ftype[0].isupper():
                field.type = Field.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{ftype}"
            else:
                field.type = Field.Type.Value(f"TYPE_{ftype.upper()}")
            if name == "Record" and fname in _ONEOF:
                field.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.Record")
    try:
        from google.protobuf.message_factory import GetMessageClass

        return GetMessageClass(descriptor)
    except ImportError:  # protobuf < 4.22
        from google.protobuf import message_factory

        return message_factory.MessageFactory(pool).GetPrototype(descriptor)


# ---- framing ----------------------------------------------------------------------------------


class _Damage:
    def __init__(self) -> None:
        self.bad_records = 0
        self.notes: list[str] = []
        self.truncated = False

    def bad_record(self, note: str) -> None:
        """Count a record that could not be read; the first five notes say why."""
        self.bad_records += 1
        if len(self.notes) < 5:
            self.notes.append(note)


def check_header(data: bytes, path: Path) -> None:
    """Raise IngestError unless `data` starts with a `.wandb` header this reader understands."""
    if len(data) < _HEADER:
        raise IngestError(str(path), "empty or cut-off .wandb file (no 7-byte header)")
    ident, magic, version = struct.unpack_from("<4sHB", data, 0)
    if ident != _IDENT or magic != _MAGIC:
        raise IngestError(str(path), "not a W&B transaction log (no ':W&B' header)")
    if version != _VERSION:
        raise IngestError(
            str(path),
            f".wandb format version {version} is newer than this logscope reads (version "
            f"{_VERSION}, wandb 0.16-0.31); upgrade logscope or export the run to CSV",
        )


def iter_payloads(data: bytes, damage: _Damage, progress: Any = None) -> Any:
    """Reassembled record payloads of a `.wandb` file's bytes (header already checked)."""
    unpack = struct.Struct("<IHB").unpack_from
    crc32 = zlib.crc32
    pos, end = _HEADER, len(data)
    pending: list[bytes] | None = None
    count = 0
    while pos < end:
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # block trailer: zero padding
            pos += left
            continue
        if pos + _HEADER > end:
            damage.truncated = True
            break
        crc, length, rtype = unpack(data, pos)
        if rtype == 0 and length == 0:  # zeroed tail of a block (preallocated / padding)
            pos += left
            continue
        if length > left - _HEADER or rtype not in _SEED:
            damage.bad_record(f"bad record header at byte {pos}; resumed at the next block")
            pending = None
            pos += left
            continue
        start = pos + _HEADER
        if start + length > end:
            damage.truncated = True
            break
        payload = data[start : start + length]
        if crc32(payload, _SEED[rtype]) != crc:
            damage.bad_record(f"bad CRC in record at byte {pos}; resumed at the next block")
            pending = None
            pos += left
            continue
        pos = start + length
        if rtype == _FULL:
            if pending is not None:
                damage.bad_records += 1
            pending = None
            yield payload
        elif rtype == _FIRST:
            if pending is not None:
                damage.bad_records += 1
            pending = [payload]
        elif pending is None:  # MIDDLE/LAST without FIRST (after a skipped block)
            damage.bad_records += 1
        elif rtype == _MIDDLE:
            pending.append(payload)
        else:
            pending.append(payload)
            yield b"".join(pending)
            pending = None
        count += 1
        if progress is not None and count % 4096 == 0:
            progress(pos, end)
    if pending is not None:
        damage.truncated = True


# ---- discovery --------------------------------------------------------------------------------


def _is_run_folder(path: Path) -> bool:
    return path.is_dir() and any(path.glob("run-*.wandb"))


def _wandb_files(path: Path) -> list[Path]:
    """The `.wandb` files `path` stands for, each once (latest-run symlink not doubled)."""
    if path.is_file():
        return [path]
    if _is_run_folder(path):
        return sorted(path.glob("run-*.wandb"))
    seen: set[Path] = set()
    files: list[Path] = []
    for child in sorted(path.iterdir()):
        if child.name == "latest-run" or not child.name.startswith(_RUN_PREFIXES):
            continue
        for file in sorted(child.glob("run-*.wandb")):
            real = file.resolve()
            if real not in seen:
                seen.add(real)
                files.append(file)
    return files


def sniff(path: Path) -> bool:
    """A `.wandb` file, a run folder holding one, or a wandb/ directory of run folders."""
    if path.is_file():
        if path.suffix != ".wandb":
            return False
        try:
            with path.open("rb") as fh:
                return fh.read(4) == _IDENT
        except OSError:
            return False
    if not path.is_dir():
        return False
    try:
        return bool(_wandb_files(path))
    except OSError:
        return False


# ---- decoding ---------------------------------------------------------------------------------


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def unwrap_config(value: Any) -> Any:
    """Some wandb versions store config values as {"value": v, "desc": ...}."""
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def _apply_config(target: dict[str, Any], items: Any) -> None:
    """Config items (top-level sections, or nested keys) into `target`, unwrapped."""
    for item in items:
        path = list(item.nested_key) if not item.key else [item.key]
        value = unwrap_config(_json(item.value_json))
        if path:
            set_path(target, path, value)


def _remove_items(target: dict[str, Any], items: Any) -> None:
    for item in items:
        path = list(item.nested_key) if not item.key else [item.key]
        node: Any = target
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and path:
            node.pop(path[-1], None)


class _Console:
    """Reassembles captured console output (text and newline arrive as separate records)."""

    def __init__(self) -> None:
        self.buffers: dict[int, str] = {}
        self.lines: list[tuple[str, int | None]] = []

    def add(self, stream: int, text: str, step: int | None) -> None:
        buffer = self.buffers.get(stream, "") + text
        if "\n" in buffer:
            *complete, buffer = buffer.split("\n")
            self.lines.extend((line.rstrip("\r"), step) for line in complete)
        self.buffers[stream] = buffer

    def close(self, step: int | None) -> None:
        for buffer in self.buffers.values():
            if buffer:
                self.lines.append((buffer, step))
        self.buffers.clear()


def _number(value_json: str) -> float | None:
    """A history value as float (NaN/Infinity included); None for non-scalars (tables …)."""
    try:
        return float(value_json)  # float() reads "NaN", "Infinity", "1e-06", "2"
    except ValueError:
        return to_float(_json(value_json)) if value_json[:1] not in "{[" else None


def _history_row(history: Any) -> tuple[int | None, float | None, list[str], list[float]]:
    """(`_step`, `_timestamp`, metric names, values) of one history record. A flattened dict
    (nested metrics) gives dotted names; one holding a `_type` key (wandb.Table, histogram) is
    media and skipped."""
    names: list[str] = []
    values: list[float] = []
    nested: dict[str, list[tuple[str, float]]] | None = None
    step = wall = None
    for item in history.item:
        nk = item.nested_key
        key = item.key or (nk[0] if len(nk) == 1 else "")
        vj = item.value_json
        if key:
            if key[0] == "_":
                if key == "_step":
                    step = int(float(vj))
                elif key == "_timestamp":
                    wall = float(vj)
                continue
            number = _number(vj)
            if number is not None:
                names.append(key)
                values.append(number)
        elif len(nk) > 1:
            if nested is None:
                nested = {}
            number = _number(vj) if nk[-1] != "_type" else math.nan
            if number is not None:
                nested.setdefault(nk[0], []).append((".".join(nk), number))
    for group in (nested or {}).values():
        if not any(k.endswith("._type") for k, _ in group):
            for k, v in group:
                names.append(k)
                values.append(v)
    return step, wall, names, values


def _read_file(path: Path, progress: Any = None) -> Run:
    data = read_bytes(path)
    check_header(data, path)
    Record = _record_class()
    damage = _Damage()
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    walls: list[float | None] = []
    config: dict[str, Any] = {}
    summaries: list[bytes] = []
    meta: dict[str, Any] = {}
    console = _Console()
    records = history_rows = 0
    last_step: int | None = None
    exit_code: int | None = None
    for payload in iter_payloads(data, damage, progress):
        records += 1
        try:
            record = Record.FromString(payload)
        except Exception:
            damage.bad_record(f"record {records}: not a W&B Record protobuf; skipped")
            continue
        kind = record.WhichOneof("record_type")
        if kind == "history":
            step, wall, row_names, row_values = _history_row(record.history)
            if step is None:
                step = record.history.step.num if record.history.HasField("step") else None
                if step is None or (step == 0 and last_step is not None):
                    step = 0 if last_step is None else last_step + 1
            last_step = step
            history_rows += 1
            n = len(row_names)
            steps.extend([step] * n)
            names.extend(row_names)
            values.extend(row_values)
            walls.extend([wall] * n)
        elif kind in ("output_raw", "output"):
            out = getattr(record, kind)
            console.add(out.output_type, out.line, last_step)
        elif kind == "config":
            _apply_config(config, record.config.update)
            _remove_items(config, record.config.remove)
        elif kind == "summary":
            summaries.append(record.summary)
        elif kind == "run":
            run_rec = record.run
            _apply_config(config, run_rec.config.update)
            for field in ("run_id", "entity", "project", "display_name", "run_group", "host"):
                if getattr(run_rec, field):
                    meta[f"wandb_{field}"] = getattr(run_rec, field)
            if run_rec.HasField("start_time"):
                meta["start_time"] = run_rec.start_time.seconds + run_rec.start_time.nanos / 1e9
            if run_rec.resumed:
                meta["resumed"] = True
        elif kind == "exit":
            exit_code = record.exit.exit_code
        elif kind == "header":
            meta["wandb_version"] = record.header.version_info.producer.split("+")[0]
    console.close(last_step)
    run = new_run(KIND, path, data)
    run.metrics = metrics_frame(steps, names, values, walls)
    config.pop("_wandb", None)
    first = int(min(steps)) if steps else 0
    run.events, printed = _console(console.lines)
    if config:
        run.config_segments.append(ConfigSegment(first_step=first, config=config))
    elif printed is not None and printed.config_segments:  # config only in the printed dump
        run.config_segments = list(printed.config_segments)
    run.meta.update(meta_from_config(run.config()))
    run.meta.update(version_and_algorithm(set(run.metric_names), run.config(), before_08="0.1-0.7"))
    if printed is not None and printed.metrics.height and printed.meta.get("verl_version"):
        run.meta["verl_version"] = printed.meta["verl_version"]  # the print format dates it
    if meta.get("wandb_project"):
        run.meta["project"] = meta["wandb_project"]
    if meta.get("wandb_display_name"):
        run.meta["experiment"] = meta["wandb_display_name"]
    run.meta.update(meta)
    run.meta["state"] = "finished" if exit_code is not None else "running or killed"
    if exit_code is not None:
        run.meta["exit_code"] = exit_code
    scalars = _summary(summaries)
    if scalars:
        run.meta["wandb_summary"] = scalars
    stats = run.parse_stats
    stats.lines_read = records
    stats.step_lines = history_rows
    stats.skipped_lines = damage.bad_records + int(damage.truncated)
    stats.notes.extend(damage.notes)
    if damage.truncated:
        stats.notes.append(
            "the file ends inside a record (run still being written, or cut off); "
            "read up to the last whole record"
        )
    if exit_code is None:
        stats.notes.append("no exit record: the run was still running or was killed")
    return run


_STEP_LINE = re.compile(r"\bstep:(\d+)\b")


@cache
def _items_class() -> Any:
    return type(_record_class()().run.config)  # ItemsRecord, via the run record's config field


def _summary(summaries: list[bytes]) -> dict[str, float]:
    """Final numeric summary values, from the last SUMMARY_TAIL summary records.

    wandb-core writes one summary record per logged step holding that step's keys, so the tail
    covers every key a verl run logs (it logs the same keys each step, validation every
    `test_freq`); reading all of them cost a third of the read time. Serialized protobufs
    concatenate into one merged message, so the tail is parsed in a single call."""
    if not summaries:
        return {}
    merged = _items_class().FromString(b"".join(summaries[-SUMMARY_TAIL:]))
    raw: dict[str, str] = {}
    for item in merged.update:
        raw[item.key or ".".join(item.nested_key)] = item.value_json
    for item in merged.remove:  # approximate: a later update after a remove is rare
        raw.pop(item.key or ".".join(item.nested_key), None)
    media = tuple(k[: -len("_type")] for k in raw if k.endswith("._type"))  # tables, histograms
    out: dict[str, float] = {}
    for key, value_json in raw.items():
        number = None if key.startswith("_") or key.startswith(media) else _number(value_json)
        if number is not None:
            out[key] = number
    return out


def _console(lines: list[tuple[str, int | None]]) -> tuple[list[Event], Run | None]:
    """Events from the captured console output, classified by the console reader's parser
    (tracebacks, OOMs, warnings, …; step hints from the printed step lines), and the Run that
    parser read from it (its config dump and print format). Raw lines when it is absent."""
    try:
        from logscope.ingest import verl_text
        from logscope.ingest.console_parser import ConsoleParser
    except ImportError:  # pragma: no cover - console reader absent
        return _raw_console_events(lines), None
    parser = ConsoleParser()
    batch: list[str] = []
    parsed_step_lines = 0
    for line_no, (text, _) in enumerate(lines, start=1):
        match = _CLEAN_STEP.match(text)
        if match is None or parsed_step_lines < PARSED_STEP_LINES:
            parsed_step_lines += match is not None
            batch.append(text)
            continue
        # History already has the metrics: later step lines only set the step hint
        if batch:
            parser.feed(batch, first_line_no=line_no - len(batch))
            batch = []
        parser.sync_step(verl_text.seq_of(line_no, 0), int(match.group(1)))
    if batch:
        parser.feed(batch, first_line_no=len(lines) - len(batch) + 1)
    printed = parser.to_run(Source("verl-console", "<wandb output_raw>"), final=True)
    return printed.events, printed


def _raw_console_events(lines: list[tuple[str, int | None]]) -> list[Event]:
    """Captured console lines as events (kind "console"). The step hint is the last verl step
    line printed before (history rows are flushed later than the text they belong to)."""
    events: list[Event] = []
    printed_step: int | None = None
    for i, (text, history_step) in enumerate(lines):
        if not text.strip():
            continue
        match = _STEP_LINE.search(text)
        if match:
            printed_step = int(match.group(1))
        hint = printed_step if printed_step is not None else history_step
        events.append(Event(line_no=i + 1, step_hint=hint, kind="console", text=text))
    return events


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    if not path.exists():
        raise IngestError(str(path), "no such file or directory")
    files = _wandb_files(path) if path.is_dir() else [path]
    if not files:
        raise IngestError(
            str(path), "no W&B run here (expected run-*.wandb, offline-run-*/ or run-*/ folders)"
        )
    if len(files) == 1:
        return [_read_file(files[0], progress)]
    runs: list[Run] = []
    failed: list[IngestError] = []
    for file in files:  # one unreadable run (e.g. just created, still empty) spares the others
        try:
            runs.append(_read_file(file, progress))
        except IngestError as exc:
            failed.append(exc)
    if not runs:
        raise failed[0]
    for run in runs:
        run.parse_stats.notes.extend(f"other run skipped: {exc}" for exc in failed)
    return runs
