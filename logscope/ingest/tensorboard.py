"""TensorBoard event files (verl's `tensorboard` logger, torch's SummaryWriter, TF2, tensorboardX).

A direct TFRecord reader over tensorboard's `event_pb2` (no TensorFlow, no reservoir sampling:
every scalar point is kept). Framing per record: u64 length, masked crc32c of the length bytes,
payload (an `Event` proto), masked crc32c of the payload; both CRCs are checked. A bad payload
CRC drops that record and reading goes on; a bad length CRC or a cut-off record ends the file
(the length can no longer be trusted). The damage is counted in `ParseStats`.

Scalars are `simple_value` (torch/tensorboardX, what verl writes; float32) or a 0-d tensor with
the `scalars` plugin (TF2). A directory is searched recursively: each folder that holds event
files is one run (verl: `tensorboard_log/{project}/{experiment}`); several event files in one
folder (restarts) are merged in file-name (= creation time) order, the later value winning.
A Hugging Face Trainer run (its `args` text summary) keeps its TrainingArguments as the config
and is marked `framework = "trl"` when they are TRL's GRPOConfig.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError, OptionalDependencyMissing
from logscope.ingest._common import (
    first_step,
    meta_from_config,
    metrics_frame,
    nest_dotted,
    new_hasher,
    read_bytes,
    version_and_algorithm,
)
from logscope.model import ConfigSegment, Run, Source

KIND = "tensorboard"
DESCRIPTION = "TensorBoard event files (events.out.tfevents.*), or a directory of them"

_MARKER = "tfevents"
_TIME_DIR = re.compile(r"^[0-9]{9,}(?:\.[0-9]+)?$")
_VERL_CONFIG_KEYS = ("actor_rollout_ref", "data", "trainer", "algorithm", "critic")
# The Hugging Face Trainer's TensorBoardCallback writes its TrainingArguments as the text "args"
# (the run's config) and the model's config.json as "model_config" (not the run's config)
_HF_ARGS_KEYS = ("output_dir", "logging_steps", "per_device_train_batch_size")
_TRL_ARGS_KEYS = ("num_generations", "max_completion_length", "beta")  # TRL's GRPOConfig

# tensorflow DataType enum values (tensorboard/compat/proto/types.proto)
_DT_STRING = 7
_DT_BFLOAT16 = 14


def _crc32c_function() -> Callable[[bytes], int]:
    """The fastest crc32c at hand: google-crc32c (C, in the `tensorboard` extra) or crc32c,
    else tensorboard's pure-Python one (about 5x slower overall on big files)."""
    try:
        import google_crc32c  # type: ignore[import-not-found]

        if google_crc32c.implementation == "c":
            return google_crc32c.value
    except ImportError:
        pass
    try:
        import crc32c  # type: ignore[import-not-found]

        return crc32c.crc32c
    except ImportError:
        pass
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as slow

    return slow


def _masker(crc32c: Callable[[bytes], int]) -> Callable[[bytes], int]:
    def masked(data: bytes) -> int:
        x = crc32c(data) & 0xFFFFFFFF
        return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    return masked


def _protos() -> Any:
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError as exc:
        raise OptionalDependencyMissing(
            "tensorboard", "tensorboard", "Reading TensorBoard event files"
        ) from exc
    return event_pb2


# ---- discovery ----------------------------------------------------------------------------


def _is_event_file(name: str) -> bool:
    return _MARKER in name and not name.endswith((".tmp", ".lock"))


def _run_folders(root: Path) -> dict[Path, list[Path]]:
    """{folder: its event files in creation order} under `root` (or for the file `root`)."""
    if root.is_file():
        return {root.parent: [root]}
    folders: dict[Path, list[Path]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        files = sorted(f for f in filenames if _is_event_file(f))
        if not files:
            continue
        folder = Path(dirpath)
        if _TIME_DIR.match(folder.name) and folder.parent in folders:
            # torch's / tensorboardX's add_hparams writes to <run>/<time.time()>/: same run
            folders[folder.parent].extend(folder / f for f in files)
        else:
            folders[folder] = [folder / f for f in files]
    return folders


def sniff(path: Path) -> bool:
    """An event file, or a directory holding one anywhere below it."""
    if path.is_file():
        return _is_event_file(path.name)
    if not path.is_dir():
        return False
    for _dirpath, _dirnames, filenames in os.walk(path):
        if any(_is_event_file(f) for f in filenames):
            return True
    return False


# ---- record framing -------------------------------------------------------------------------


class _Damage:
    def __init__(self) -> None:
        self.records = 0
        self.notes: list[str] = []


def _records(
    path: Path, masked_crc: Callable[[bytes], int], damage: _Damage, digest: Any
) -> list[bytes]:
    """Payloads of the TFRecord file at `path`, stopping at the first untrustworthy length."""
    data = read_bytes(path)
    digest.update(data)
    out: list[bytes] = []
    pos, end = 0, len(data)
    unpack_q, unpack_i = struct.Struct("<Q").unpack_from, struct.Struct("<I").unpack_from
    while pos < end:
        if end - pos < 12:
            damage.records += 1
            damage.notes.append(f"{path.name}: cut off at byte {pos} (incomplete record header)")
            break
        header = data[pos : pos + 8]
        (length,) = unpack_q(data, pos)
        (length_crc,) = unpack_i(data, pos + 8)
        if masked_crc(header) != length_crc:
            damage.records += 1
            damage.notes.append(
                f"{path.name}: bad length CRC at byte {pos}; the rest of the file is skipped"
            )
            break
        start = pos + 12
        stop = start + length
        if stop + 4 > end:
            damage.records += 1
            damage.notes.append(f"{path.name}: cut off at byte {pos} (record of {length} bytes)")
            break
        payload = data[start:stop]
        (payload_crc,) = unpack_i(data, stop)
        pos = stop + 4
        if masked_crc(payload) != payload_crc:
            damage.records += 1
            damage.notes.append(
                f"{path.name}: bad data CRC in record at byte {start - 12}; skipped"
            )
            continue
        out.append(payload)
    return out


# ---- decoding ---------------------------------------------------------------------------------


_STRUCT = {1: struct.Struct("<f"), 2: struct.Struct("<d"), 3: struct.Struct("<i"),
           9: struct.Struct("<q"), 19: struct.Struct("<e"), 10: struct.Struct("<?")}  # fmt: skip


def _tensor_scalar(tensor: Any) -> float | None:
    """The value of a 0-d (or 1-element) numeric TensorProto, else None."""
    dims = tensor.tensor_shape.dim
    if dims and (len(dims) > 1 or dims[0].size != 1):
        return None
    dtype = tensor.dtype
    content = tensor.tensor_content
    if content:
        if dtype == _DT_BFLOAT16:
            return struct.unpack("<f", b"\x00\x00" + content)[0] if len(content) == 2 else None
        unpacker = _STRUCT.get(dtype)
        if unpacker is None or len(content) != unpacker.size:
            return None
        return float(unpacker.unpack(content)[0])
    if dtype == 1 and len(tensor.float_val) == 1:
        return tensor.float_val[0]
    if dtype == 2 and len(tensor.double_val) == 1:
        return tensor.double_val[0]
    if dtype == _DT_STRING:
        return None
    for field in ("float_val", "double_val", "int_val", "int64_val", "bool_val"):
        vals = getattr(tensor, field)
        if len(vals) == 1:
            return float(vals[0])
    if dtype in (19, _DT_BFLOAT16) and len(tensor.half_val) == 1:
        bits = struct.pack("<H", tensor.half_val[0])
        if dtype == 19:
            return struct.unpack("<e", bits)[0]
        return struct.unpack("<f", b"\x00\x00" + bits)[0]
    return None


def _config_from_text(tag: str, tensor: Any) -> dict[str, Any] | None:
    """A verl config in a text summary (JSON or YAML, maybe in a markdown code fence)."""
    if tensor.dtype != _DT_STRING or not tensor.string_val:
        return None
    text = tensor.string_val[0].decode("utf-8", "replace").strip()
    if text.startswith("```"):
        text = text.strip("`").split("\n", 1)[-1]
    parsed: Any = None
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            import yaml

            parsed = yaml.safe_load(text)
        except Exception:
            return None
    if not isinstance(parsed, dict):
        return None
    name = tag.removesuffix("/text_summary")  # torch's add_text adds it
    if name == "model_config" and "model_type" in parsed:
        return None
    if name == "args" and all(k in parsed for k in _HF_ARGS_KEYS):
        return parsed
    if "config" in tag.lower() or any(k in parsed for k in _VERL_CONFIG_KEYS):
        return parsed
    return None


def _config_from_hparams(content: bytes) -> dict[str, Any] | None:
    try:
        from tensorboard.plugins.hparams import plugin_data_pb2
    except ImportError:  # pragma: no cover - same package as event_pb2
        return None
    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    if not data.HasField("session_start_info"):
        return None
    flat: dict[str, Any] = {}
    for key, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        if kind in ("number_value", "string_value", "bool_value"):
            flat[key] = getattr(value, kind)
    return nest_dotted(flat) if flat else None


class _RunBuilder:
    """Columns of one run folder, filled event file by event file.

    Float32 tensor scalars (TF2) keep their 4 raw bytes; they are decoded in one numpy call
    at the end (`values` holds a placeholder at `f32_index`)."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.tags: list[str] = []
        self.values: list[float] = []
        self.walls: list[float] = []
        self.f32_index: list[int] = []
        self.f32_bytes: list[bytes] = []
        self.config: dict[str, Any] = {}
        self.plugin_of_tag: dict[str, str] = {}
        self.events = 0
        self.scalar_events = 0
        self.undecodable = 0

    def add_file(self, payloads: list[bytes], event_pb2: Any) -> None:
        Event = event_pb2.Event
        steps, tags, values, walls = self.steps, self.tags, self.values, self.walls
        f32_index, f32_bytes = self.f32_index, self.f32_bytes
        plugin_of_tag = self.plugin_of_tag
        for payload in payloads:
            try:
                event = Event.FromString(payload)
            except Exception:  # a record with a valid CRC that is not an Event
                self.undecodable += 1
                continue
            self.events += 1
            if not event.HasField("summary"):
                continue
            step = event.step
            wall = event.wall_time
            had_scalar = False
            for value in event.summary.value:
                tag = value.tag
                plugin = plugin_of_tag.get(tag)
                if plugin is None or plugin == "hparams":
                    # metadata comes with a tag's first event (TF2 writes it only then)
                    plugin = value.metadata.plugin_data.plugin_name
                    plugin_of_tag[tag] = plugin
                    if plugin == "hparams":
                        config = _config_from_hparams(value.metadata.plugin_data.content)
                        if config:
                            self.config.update(config)
                        continue
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    steps.append(step)
                    tags.append(tag)
                    values.append(value.simple_value)
                    walls.append(wall)
                    had_scalar = True
                elif kind != "tensor":
                    continue
                elif plugin == "" or plugin == "scalars":
                    tensor = value.tensor
                    content = tensor.tensor_content
                    number: float | None
                    if len(content) == 4 and tensor.dtype == 1:  # one float32, whatever the shape
                        f32_index.append(len(values))
                        f32_bytes.append(content)
                        number = 0.0
                    else:
                        number = _tensor_scalar(tensor)
                    if number is not None:
                        steps.append(step)
                        tags.append(tag)
                        values.append(number)
                        walls.append(wall)
                        had_scalar = True
                elif plugin == "text":
                    config = _config_from_text(tag, value.tensor)
                    if config:
                        self.config.update(config)
            self.scalar_events += had_scalar

    def value_column(self) -> Any:
        if not self.f32_index:
            return self.values
        import numpy as np

        column = np.asarray(self.values, dtype=np.float64)
        column[self.f32_index] = np.frombuffer(b"".join(self.f32_bytes), dtype="<f4")
        return column


def _meta_from_path(root: Path, folder: Path) -> tuple[str, dict[str, Any]]:
    """Run name and project/experiment from where the folder sits (verl: .../{project}/{exp})."""
    base = root.parent if root.is_file() else root
    try:
        rel_parts = folder.relative_to(base).parts
    except ValueError:
        rel_parts = ()
    parts = [p for p in (base.parts + rel_parts) if p not in ("", "/")]
    if "tensorboard_log" in parts:
        parts = parts[len(parts) - parts[::-1].index("tensorboard_log") :]
    meta: dict[str, Any] = {}
    if parts:
        meta["experiment"] = parts[-1]
    if len(parts) >= 2:
        meta["project"] = parts[-2]
    run_id = "/".join(rel_parts) if rel_parts else (folder.name or str(folder))
    return run_id, meta


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    event_pb2 = _protos()
    masked_crc = _masker(_crc32c_function())
    folders = _run_folders(path)
    if not folders:
        raise IngestError(str(path), "no TensorBoard event files (events.out.tfevents.*) found")
    total = sum(len(files) for files in folders.values())
    done = 0
    runs: list[Run] = []
    for folder, files in folders.items():
        builder = _RunBuilder()
        damage = _Damage()
        records = 0
        digest = new_hasher()
        digest.update(KIND.encode())
        for file in files:
            payloads = _records(file, masked_crc, damage, digest)
            records += len(payloads)
            bad_before = builder.undecodable
            builder.add_file(payloads, event_pb2)
            if builder.undecodable > bad_before:
                damage.records += builder.undecodable - bad_before
                damage.notes.append(
                    f"{file.name}: {builder.undecodable - bad_before} record(s) are not "
                    "TensorBoard events; skipped"
                )
            done += 1
            if progress is not None:
                progress(done, total)
        name, meta = _meta_from_path(path, folder)
        meta["run_name"] = name
        run = Run(
            id=digest.hexdigest(),
            source=Source(KIND, str(folder if path.is_dir() else path)),
            meta=meta,
        )
        run.metrics = metrics_frame(
            builder.steps, builder.tags, builder.value_column(), builder.walls
        )
        stats = run.parse_stats
        stats.lines_read = records + damage.records
        stats.step_lines = builder.scalar_events
        stats.skipped_lines = damage.records
        stats.notes.extend(damage.notes[: stats.MAX_EXAMPLES])
        if len(files) > 1:
            stats.notes.append(f"{len(files)} event files merged (later value wins per step/tag)")
        if builder.config:
            run.config_segments.append(ConfigSegment(first_step(run.metrics), builder.config))
            for key, value in meta_from_config(builder.config).items():
                run.meta.setdefault(key, value)
        if all(k in builder.config for k in _HF_ARGS_KEYS):  # a Hugging Face Trainer run
            if all(k in builder.config for k in _TRL_ARGS_KEYS):
                run.meta["framework"] = "trl"
        else:
            run.meta.update(
                version_and_algorithm(set(run.metric_names), builder.config, before_08="0.3-0.7")
            )
        runs.append(run)
    return runs
