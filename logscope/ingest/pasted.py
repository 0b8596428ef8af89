"""What copies of console text add, and the layouts people paste metrics in.

Real excerpts are rarely raw `tee` output: a Markdown quote puts `> ` before every line, a log
collector (Kubernetes, Docker, Slurm, Python's `logging`) stamps a time or a pod or rank name in
front or wraps each line in a JSON record, a traceback arrives flattened into one quoted line with `\\n` escapes, a run ends in W&B's
summary block, or the user reformats a step as `key: value` lines. The functions here undo the
decorations and find the metrics; `console_parser.ConsoleParser` calls them on every line it
reads itself (the bulk path of console.py never claims a decorated line: its clean step lines
start with a Ray prefix, a tqdm bar or `step:`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from logscope import metric_registry
from logscope.ingest import verl_text as vt
from logscope.ingest.tables import STEP_COLUMNS

# ---- decorations in front of a line ------------------------------------------------------------

_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_TIME = r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"
_ZONE = r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
DECORATION_RE = re.compile(
    "|".join(
        (
            r"(?:> ?)+",  # Markdown quote markers (nested: `> > `)
            r"`{1,3}(?=[^`\s])",  # a code span or fence opened on the line's first text
            # RFC 3339 / ISO 8601 (Docker, Kubernetes; CRI adds `stdout F`), Python logging's
            # `2025-01-01 10:00:00,123`; one blank after it is part of the stamp, so the
            # indentation of traceback frames survives
            _DATE
            + r"[T ]"
            + _TIME
            + _ZONE
            + r"(?:[ \t](?:stdout|stderr) [FP])?(?:[ \t]|$)"
            # and the logging level after it (`… INFO `, `… - WARNING - `, `… [ERROR] `)
            + r"(?:(?:[-|:][ \t])?\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?"
            + r"(?:[ \t]?[-:|])?(?:[ \t]|$))?",
            r"\[[^\]\n]{0,40}?[0-9]{1,2}:[0-9]{2}:[0-9]{2}[^\]\n]{0,60}\] ?",  # `[time ...]`
            # syslog / journalctl: `Dec 03 12:00:00 gpu-node-1 python[12345]: `
            r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 0-9][0-9] "
            + _TIME
            + r" [\w.\-]+ [\w.\-/]+(?:\[[0-9]+\])?: ",
            r"\[pod/[^\]\n]+\] ",  # kubectl logs --prefix
            r"[A-Za-z0-9][\w.\-]*[-_][0-9]+ +\| ",  # docker compose logs: `trainer-1  | `
            r"\[(?:rank|default)[0-9]{1,5}\]:? ?",  # torchrun's `[rank0]: ` / `[default0]:`
            r"[0-9]{1,5}: ",  # srun --label: the task rank
        )
    )
)


_DECORATION_STARTS = frozenset(">[0123456789`JFMASOND")


# glog's stamp as torch prints it (`[W1106 10:41:32.123456789 TCPStore.cpp:125] `): its time is a
# decoration, its severity is not; it becomes torch's older `[W TCPStore.cpp:125] `.
GLOG_STAMP_RE = re.compile(r"\[([IWEF])[0-9]{4} [0-9:.]{8,24} ([^\]\s]+:[0-9]+)\] ?")
# Ray's C++ logger at its fatal level (`[2025-07-06 07:14:27,052 C 2915798 2915798]
# task_receiver.cc:219:  Check failed: …`, C is RAY_LOG(FATAL)) becomes glog's `[F file:line] `;
# its other levels are a timestamp decoration.
RAY_FATAL_STAMP_RE = re.compile(
    r"\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:,.]{8,15} C [0-9]+ [0-9]+\] ([^\s:]+:[0-9]+):? *"
)


def strip_decorations(text: str) -> str:
    """`text` without the quote markers, timestamps and pod/rank labels in front of it."""
    for _ in range(4):  # a few kinds stacked: `> 2025-…Z [pod/x/y] …`
        if text[:1] not in _DECORATION_STARTS and " | " not in text[:80]:
            return text  # most lines: a set lookup and a short search, no regex
        if (glog := GLOG_STAMP_RE.match(text)) is not None:
            return f"[{glog[1]} {glog[2]}] " + text[glog.end() :]
        if (ray := RAY_FATAL_STAMP_RE.match(text)) is not None:
            return f"[F {ray[1]}] " + text[ray.end() :]
        m = DECORATION_RE.match(text)
        if m is None or not m.end():
            return text
        text = text[m.end() :]
    return text


# GitHub turns addresses in a pasted log into links (`ip: [10.29.214.5](http://10.29.214.5/)`),
# and `#21`, `@name` and commit hashes into links to its own pages (`frame [#21](https://github.com/
# o/r/pull/21):`).
AUTOLINK_RE = re.compile(
    r"\[([^\]\s]+)\]\((?:https?://)?\1/?\)"
    r"|\[(#[0-9]+|@[\w.\-]+|[0-9a-f]{7,40})\]\(https://github\.com/[^)\s]{0,200}\)"
)


def unlink(text: str) -> str:
    """`[x](http://x/)` → `x` (a link GitHub made of a log's own text)."""
    return AUTOLINK_RE.sub(lambda m: m[1] or m[2], text) if "](" in text else text


# ---- a line inside a log collector's JSON record ----------------------------------------------

# Docker's json-file driver (`{"log": "…\\n", "stream": "stdout", "time": …}`), Fluent Bit, Loki
# and journald exports keep the printed line under one of these keys.
RECORD_TEXT_KEYS = ("log", "message", "msg", "MESSAGE")


_DECODER = json.JSONDecoder()
_JSON_STRING_INSIDE = r'((?:[^"\\]|\\.)*)'  # up to the first unescaped quote (or the end)
_CUT_RECORD_RE = re.compile(
    r'\{"(?:' + "|".join(RECORD_TEXT_KEYS) + r')" ?: ?"' + _JSON_STRING_INSIDE
)
_STRING_TAIL_RE = re.compile(_JSON_STRING_INSIDE)
_JOINED_RECORDS = '"} {"'  # records a paste joined onto one line (the first maybe cut)


def is_record(text: str) -> bool:
    """Might `text` hold collector records (cheap: `record_lines` decides)?"""
    return text[:2] == '{"' or _JOINED_RECORDS in text


def record_lines(text: str) -> list[str] | None:
    """The printed lines inside the collector JSON records on a line, or None when it holds none.

    A paste may join records with blanks; then the first may be cut at its start and the last
    at its end: of each, the text of its string is kept, unescaped (not its other fields)."""
    lines, start = [], 0
    if text[:2] != '{"':
        cut = text.find(_JOINED_RECORDS)
        if cut < 0:
            return None
        head = _STRING_TAIL_RE.match(text, 0, cut + 1)  # the cut record's text, not its fields
        lines, start = [_unescape(head[1] if head else text[:cut])], cut + 3
    pos, end, records = start, len(text.rstrip()), 0
    while pos < end:
        try:
            record, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):  # a cut record, or nesting deeper than Python's
            cut = _CUT_RECORD_RE.match(text, pos)
            lines.append(_unescape(cut[1]) if cut else text[pos:end])
            break
        held = _held_text(record)
        if held is None:
            return None
        lines.append(held)
        records += 1
        while text[pos : pos + 1] in (" ", "\t"):
            pos += 1
    return lines if records else None


def _held_text(record: object) -> str | None:
    held = [record.get(key) for key in RECORD_TEXT_KEYS] if isinstance(record, dict) else []
    return next((_text(line.rstrip("\n")) for line in held if isinstance(line, str)), None)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _text(decoded: str) -> str:
    """A JSON string as text: a lone surrogate (`\\ud800`, no character) becomes U+FFFD, as an
    undecodable byte of the file does."""
    if _SURROGATE_RE.search(decoded) is None:
        return decoded
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _unescape(fragment: str) -> str:
    """A JSON string's inside (`\\u001b[36m(…`) as text; as it stands when it does not decode."""
    try:
        return _text(json.loads('"' + fragment + '"').rstrip("\n"))
    except (ValueError, RecursionError):
        return fragment


# ---- lines a paste joined into one ------------------------------------------------------------

# Where a line break stood before a paste joined the lines with blanks (GitHub's rendering of an
# unfenced block, a chat window): before a Ray prefix with a pid (a bare `(raylet)` or Ray's
# `(pid=1, ip=…)` actor repr also stand inside messages), or before a step record after a value.
_STEP_RECORD = r"step:[0-9]+ - [A-Za-z_][\w./@\-]*:"  # a record's head: `step:3 - actor/x:`
JOINED_AT_RE = re.compile(
    r" (?=\((?:[A-Za-z0-9_.:\-]+ )?[A-Za-z_][A-Za-z0-9_.\-]* pid=[0-9]+(?:, ip=[0-9A-Za-z.:_\-]+)?\) )"
    r"|(?<=[0-9a-z]) (?=" + _STEP_RECORD + ")"
)
_PREFIXED_STEP_RE = re.compile(r"\([^)]*\) " + _STEP_RECORD)
MIN_PREFIX_JOINS = 2  # one prefix inside a line may be a message quoting it


def split_joined(text: str) -> list[str] | None:
    """The lines of a paste joined into one line, cut before each Ray prefix (a prefix right after
    another, `(vLLMHttpServer pid=1) (EngineCore pid=2)`, is one head) and each step record inside
    it; None when `text` is one line."""
    if text.count(" pid=") < MIN_PREFIX_JOINS and " step:" not in text:
        return None  # most lines: one prefix (its own) and no step record
    pieces, start, prefix_joins = [], 0, 0
    for m in JOINED_AT_RE.finditer(text):
        piece = text[start : m.start()]
        if vt.split_prefix(piece) == (piece, ""):  # only a prefix so far: the next one joins it
            continue
        pieces.append(piece)
        start = m.start() + 1
        prefix_joins += text[start] == "(" and not _PREFIXED_STEP_RE.match(text, start)
    pieces.append(text[start:])
    steps_joined = len(pieces) - 1 > prefix_joins
    return pieces if steps_joined or prefix_joins >= MIN_PREFIX_JOINS else None


# ---- flattened text: a traceback (or log) inside one quoted line -------------------------------

_FLAT_HINTS = ("Traceback", "Error", "Exception", "step:", "ray::", 'File "', 'File \\"')
_LIST_JOIN_RE = re.compile(r"""\\n['"],\s*['"]""")  # `...\n', '  File ...` (a repr'd list)


def is_flattened(text: str) -> bool:
    """A line holding several log lines as `\\n` escapes (a repr'd string, JSON, a Ray status)."""
    return "\\n" in text and any(hint in text for hint in _FLAT_HINTS)


def unfold(text: str) -> list[str]:
    """The lines of a flattened text, with `\\"`, `\\'` and `\\t` unescaped."""
    text = _LIST_JOIN_RE.sub("\\\\n", text)
    parts = text.split("\\n")
    return [p.replace('\\"', '"').replace("\\'", "'").replace("\\t", "\t") for p in parts]


# ---- step records without their `step:N` --------------------------------------------------------

# A metric key as verl and its forks write them: path-like, at least one `/`.
METRIC_KEY = r"[A-Za-z_][A-Za-z0-9_@.\-()]*(?:/[A-Za-z0-9_@.\-()]+)+"
METRIC_KEY_RE = re.compile(METRIC_KEY)
MIN_HEADLESS_ITEMS = 2


def headless_items(text: str) -> bool:
    """Does this line read as the items of a step line whose `step:N - ` was cut off (a copy that
    starts mid-line, a terminal wrap)? Items and ` - ` separators, at least two metric items."""
    if not vt.CONT_RE.match(text):
        return False
    good = 0
    for item in text.split(" - "):
        key, colon, value = item.strip(" -").partition(":")
        if colon and METRIC_KEY_RE.fullmatch(key) and vt.parse_value(value) is not None:
            good += 1
            if good >= MIN_HEADLESS_ITEMS:
                return True
    return False


def cut_first_item(body: str) -> str:
    """Drop the first item of a headless record when it is a fragment: no `key:`, or a key whose
    family (the part before the first `/`) is cut (`ritic/score/max` beside `critic/...`)."""
    items = body.split(" - ")
    if len(items) < 2:
        return body
    key, colon, _ = items[0].strip(" -").partition(":")
    if not colon or not METRIC_KEY_RE.fullmatch(key):
        return " - ".join(items[1:])
    family = key.split("/", 1)[0]
    others = {i.split("/", 1)[0] for i in items[1:]}
    if family not in others and any(o.endswith(family) and o != family for o in others):
        return " - ".join(items[1:])
    return body


# ---- Python list reprs (Hydra's overrides) -----------------------------------------------------

QUOTED_RE = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def quoted_items(text: str) -> list[str]:
    """The complete quoted strings of a (possibly cut off) Python list repr, in order."""
    return [a if a or not b else b for a, b in QUOTED_RE.findall(text)]


# ---- W&B's end-of-run block ------------------------------------------------------------------

WANDB_RE = re.compile(r"^wandb:[ \t]?(.*)$")
UPLOADING_RE = re.compile(r"\buploading history steps [0-9]+-([0-9]+)")
WANDB_PAIR_RE = re.compile(r"^[ \t]*(" + METRIC_KEY + r"|[A-Za-z_][\w@.\-]*)[ \t]+(\S+)[ \t]*$")


@dataclass
class WandbFooter:
    """`wandb: Run history:` (sparklines, never read) and `wandb: Run summary:` (final values)."""

    mode: str | None = None  # "history", "summary" or None
    summary: dict[str, float] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)  # the keys the sparklines draw
    line_no: int | None = None
    last_step: int | None = None  # `uploading history steps 50-54`: W&B's step = verl's step

    def take(self, line_no: int, text: str) -> bool:
        """Consume a `wandb:` line of the block (True), or say it is not one."""
        m = WANDB_RE.match(text)
        if m is None:
            self.mode = None
            return False
        body = m.group(1).strip()
        up = UPLOADING_RE.search(body)
        if up is not None:
            self.last_step = max(self.last_step or 0, int(up.group(1)))
        if body in ("Run history:", "Run summary:"):
            self.mode = body.split()[1].rstrip(":")
            self.line_no = self.line_no or line_no
            return True
        if self.mode is None:
            return False
        if not body:
            return True  # a blank `wandb:` line inside the block
        pair = WANDB_PAIR_RE.match(body)
        if pair is None:
            self.mode = None
            return False
        if self.mode == "summary":
            value = value_of(pair.group(2))
            if value is not None:
                self.summary[pair.group(1)] = value
        elif pair.group(1) not in self.history:
            self.history.append(pair.group(1))
        return True


# ---- metrics in a layout that is not verl's ----------------------------------------------------

# W&B and JSON spell non-finite values `NaN`, `Infinity`; pandas and others `Inf`
# (YAML's `.nan`, `.inf`)
NON_FINITE = {
    "NaN": "nan",
    "Inf": "inf",
    "-Inf": "-inf",
    "Infinity": "inf",
    "-Infinity": "-inf",
    ".nan": "nan",
    ".inf": "inf",
    "-.inf": "-inf",
}
_NUM = r"(?:np\.(?:float|int)[0-9]+\()?(" + vt.NUMBER + r"|NaN|-?Inf(?:inity)?)\)?"


def value_of(text: str) -> float | None:
    """A value as pasted metrics print it: verl's (`0.5`, `nan`, `np.float64(0.5)`) or `NaN`,
    `Inf`, `Infinity`."""
    return vt.parse_value(NON_FINITE.get(text, text))


LOOSE_PAIR_RE = re.compile(
    r"(?<![\w/.\-])['\"]?(" + METRIC_KEY + r")['\"]?"
    r"(?:[ \t]*[:=][ \t]*|[ \t]*\|[ \t]*|[ \t]+)['\"]?" + _NUM + r"(?![\w.])"
)
STEP_MARK_RE = re.compile(
    r"(?i)(?<![\w/])(?:_step|global[_ ]step|step|iteration|iter)[ \t]*[:=#]?[ \t]*([0-9]{1,12})\b"
)
INITIAL_VAL_RE = re.compile(r"Initial validation metrics")
# A line of a YAML block mapping: `actor:` opens a level, `  grad_norm: 0.34` under it is
# `actor/grad_norm` (EasyR1's console logger prints `Step N`, then `yaml.dump` of the metrics
# split at `/` into nested levels).
YAML_LINE_RE = re.compile(r"^( *)([A-Za-z_][\w.@\-()/]*):(?: +(\S+))?$")
MIN_LOOSE_KEYS = 3
# A table's step column: a table file's (W&B's `_step`, a DataFrame's `global_step`) or verl's key.
STEP_HEADERS = frozenset((*STEP_COLUMNS, "training/global_step"))
_TABLE_STEP_RE = re.compile(r"[0-9]{1,12}")
TABLE_RULE_RE = re.compile(r"^\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?$")


def table_cells(text: str) -> list[str]:
    """The cells of a Markdown table row (`| a | b |`) or of a blank-aligned one (a DataFrame's
    print)."""
    text = text.strip()
    if text.startswith("|"):
        return [cell.strip() for cell in text.strip("|").split("|")]
    return text.split()


def table_header(text: str) -> list[str] | None:
    """The column names when `text` heads a table of steps: a step column and metric keys."""
    cells = table_cells(text)
    named = cells[1:] if cells[:1] == [""] else cells  # pandas' to_markdown: the index first
    if len(named) < 2 or not any(c in STEP_HEADERS for c in named):
        return None
    if not all(c in STEP_HEADERS or METRIC_KEY_RE.fullmatch(c) for c in named):
        return None
    return cells


MIN_KNOWN_KEYS = 2  # ... or this many keys that are all known verl metrics


@dataclass
class LooseRecord:
    """`key: value` metric pairs of one step in a non-native layout."""

    line_no: int
    step: int | None
    pairs: dict[str, float] = field(default_factory=dict)


@dataclass
class LooseMetrics:
    """Collects `key: value` / `key = value` / `| key | value |` / `key  value` metric pairs from
    lines that are not verl step lines, grouped into steps: a new group starts at a step marker
    (`step 3`, `global_step=3`, `Initial validation metrics` = step 0) or when a key repeats."""

    records: list[LooseRecord] = field(default_factory=list)
    _mark: int | None = None
    _mark_line: int = 0
    #: (indent, key) of the open levels of a YAML mapping after a line that is only a step
    #: marker; None outside one
    _levels: list[tuple[int, str]] | None = None
    #: the column names of the table of steps being read (a row a step); None outside one
    _columns: list[str] | None = None

    def take(self, line_no: int, text: str) -> None:
        """Read the pairs and step marker of one line (a marker before its pairs counts)."""
        if self._levels is not None and self._yaml_line(line_no, text):
            return
        if self._columns is not None and self._table_row(line_no, text):
            return
        if "/" in text and (columns := table_header(text)) is not None:
            self._columns = columns
            return
        pairs = list(LOOSE_PAIR_RE.finditer(text)) if "/" in text else []
        head = text[: pairs[0].start()] if pairs else text
        if "nitial validation metrics" in head and INITIAL_VAL_RE.search(head):
            self._new_mark(line_no, 0)
        elif m := STEP_MARK_RE.search(head):
            self._new_mark(line_no, int(m.group(1)))
            if not pairs and m.end() - m.start() == len(text.strip()):
                self._levels = []  # `Step 13` alone: a YAML mapping of its metrics may follow
        for pair in pairs:
            parsed = value_of(pair.group(2))
            if parsed is not None:
                self._add(line_no, pair.group(1), parsed)

    @property
    def in_mapping(self) -> bool:
        """Inside the YAML mapping of a step's metrics (its lines are not a config)."""
        return self._levels is not None

    def _yaml_line(self, line_no: int, text: str) -> bool:
        """Take one line of the YAML mapping after a step marker (False: the mapping ended)."""
        levels = self._levels
        assert levels is not None
        m = YAML_LINE_RE.match(text)
        if m is None:
            self._levels = None
            return False
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        while levels and levels[-1][0] >= indent:
            levels.pop()
        if value is None:
            levels.append((indent, key))
        elif (parsed := value_of(value)) is not None:
            self._add(line_no, "/".join([k for _, k in levels] + [key]), parsed)
        return True

    def _table_row(self, line_no: int, text: str) -> bool:
        """Take one row of a table of steps (False: the table ended). A DataFrame's print puts
        its index first: one cell more than the header."""
        columns = self._columns
        assert columns is not None
        if TABLE_RULE_RE.match(text.strip()):
            return True  # Markdown's `|---|---|` under the header
        cells = table_cells(text)
        if len(cells) == len(columns) + 1 and not text.lstrip().startswith("|"):
            cells = cells[1:]
        row = dict(zip(columns, cells, strict=False)) if len(cells) == len(columns) else {}
        step = next((row.get(c, "") for c in columns if c in STEP_HEADERS), "")
        if not _TABLE_STEP_RE.fullmatch(step):
            self._columns = None
            return False
        self._new_mark(line_no, int(step))
        for key, cell in row.items():
            if key and key not in STEP_HEADERS and (value := value_of(cell)) is not None:
                self._add(line_no, key, value)
        return True

    def _add(self, line_no: int, key: str, value: float) -> None:
        rec = self.records[-1] if self.records else None
        if rec is None or key in rec.pairs or (self._mark_line > rec.line_no):
            rec = LooseRecord(line_no, self._mark if self._mark_line else None)
            self.records.append(rec)
            self._mark_line = 0
        rec.pairs[key] = value

    def _new_mark(self, line_no: int, step: int) -> None:
        self._mark, self._mark_line = step, line_no
        self._levels = None

    def steps(self) -> list[LooseRecord]:
        """The records that hold a step's worth of metrics: at least three keys, or two that
        are both verl metrics the registry knows (`timing_s/step`, `timing_s/gen`; the step
        itself does not count)."""
        return [
            r
            for r in self.records
            if len(r.pairs) >= MIN_LOOSE_KEYS
            or (
                len(keys := [k for k in r.pairs if k != "training/global_step"]) >= MIN_KNOWN_KEYS
                and all(metric_registry.lookup(k) is not None for k in keys)
            )
        ]
