"""What a verl console line is: the patterns and small pure functions both console paths share.

verl_formats.md §1. The regexes are written in the common subset of Python `re` and Rust `regex`
(polars), with explicit ASCII classes (`[0-9]`, `[ \\t]`), so the bulk polars path and the
line-by-line path classify a line the same way.

A physical line is split on `\\r` (tqdm) into segments; a segment is cleaned by removing ANSI
codes, the Ray prefix `(Name pid=…, ip=…) ` and the trailing blanks / Ray dedup suffix.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from typing import Any

# ---- patterns (shared with the polars path) ----------------------------------------------------

ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
PREFIX_BODY = (
    # `(WorkerDict pid=1)`, `(raylet)`, `(pid=1)`; a named actor's name first (`(qORZMeWorkerDict_0:0
    # WorkerDict pid=1)`)
    r"(?:[A-Za-z_][A-Za-z0-9_.\-]*(?: \+[0-9A-Za-z.]+)?(?: pid=[0-9]+)?|pid=[0-9]+"
    r"|[A-Za-z0-9_.:\-]+ [A-Za-z_][A-Za-z0-9_.\-]* pid=[0-9]+)"
    r"(?:, ip=[0-9A-Za-z.:_\-]+)?"  # an address, or a host name (`ip=train-1328-worker-0`)
)
PREFIX = r"^\(" + PREFIX_BODY + r"\) ?"
TAIL = r"[ \t]*(?:(?:\[repeated [0-9]+x across cluster\]|\(Ray deduplicates logs by default\.).*)?$"
# A tqdm bar glued in front of a step line (stdout and stderr in one file without Ray).
BAR = r"[^|]*[0-9]{1,3}%\|[^|]*\|[^\[]*\[[^\]]*\]"
STEP = r"^(?:" + BAR + r")?step:([0-9]{1,18})(?: - (.*))?$"
STEP_START = r"^step:[0-9]{1,18}(?: - |$)"
# What may stand before `step:` on a step line once ANSI codes are gone.
HEAD = r"^(?:\(" + PREFIX_BODY + r"\) ?)?(?:" + BAR + r")?$"
TQDM = r"[0-9]{1,3}%\|[^|]*\||[0-9]+it \[[0-9:]+(?:<[0-9:?]+)?, *[0-9.?]+(?:it/s|s/it)\]"
# A raw segment that is only ANSI codes, a Ray prefix and blanks (cleans to nothing).
EMPTYISH_BODY = r"(?:" + ANSI + r")*(?:\(" + PREFIX_BODY + r"\))?(?:" + ANSI + r"|[ \t])*"
EMPTYISH = r"^" + EMPTYISH_BODY + r"$"
# A terminal-wrapped fragment of a step line: items and ` - ` separators, no other blanks.
CONT = r"^[ -]{0,3}[^ \t]+(?: - [^ \t]+)*[ -]{0,3}$"
# A decimal number as verl prints one (`.3f` or repr); `_items.c` converts exactly these.
DECIMAL = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
NUMBER = DECIMAL + r"|nan|-?inf|True|False"
VALUE = r"^(?:" + NUMBER + r")$"
# VALUE minus True/False: what a Float64 cast reads (the bulk path fixes booleans up itself).
NUMERIC = r"^(?:" + DECIMAL + r"|nan|-?inf)$"
# One `key:value` on a line of its own (after a bare `step:N`), maybe a Markdown list item.
ONE_ITEM = r"^[ -]{0,3}([A-Za-z_][\w./@-]*:)\s?(" + NUMBER + r")$"
NP_WRAP = r"^np\.(?:float|int|uint)[0-9]+\((.*)\)$"
NP_BOOL = r"^np\.(True|False)_$"
# `.3f` shape (verl 0.1–0.4); nan/inf print the same in both eras.
THREE_DECIMALS = r"^(?:-?[0-9]+\.[0-9]{3}|nan|-?inf)$"
REPEATED = r"\[repeated ([0-9]+)x across cluster\]"
LOGGER = r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:,.]+):"
# vLLM's logger (`ERROR 06-04 22:25:57 [multiproc_executor.py:932] …`): its formatter repeats the
# head on every line of a multi-line message, a traceback's too; one blank after it is its own.
VLLM_LOGGER = (
    r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r" \[[^\]\s]+:[0-9]+\] ?"
)

ANSI_RE = re.compile(ANSI)
PREFIX_RE = re.compile(PREFIX)
INNER_PREFIX_RE = re.compile(r"\([A-Za-z_][A-Za-z0-9_.\-]* pid=[0-9]+\) ?")  # no `^`: at a position
TAIL_RE = re.compile(TAIL)
SUFFIX_RE = re.compile(r"\[repeated [0-9]+x across cluster\]|\(Ray deduplicates logs by default\.")
STEP_RE = re.compile(STEP)
# STEP without the glued tqdm bar (which needs a `%|`): on a line without `%|` it means the same
# and does not scan the whole line for a bar.
STEP_PLAIN_RE = re.compile(r"^step:([0-9]{1,18})(?: - (.*))?$")
STEP_START_RE = re.compile(STEP_START)
TQDM_RE = re.compile(TQDM)
TQDM_IT_RE = re.compile(r"it \[[0-9:]+(?:<[0-9:?]+)?, *[0-9.?]+(?:it/s|s/it)\]")
_DIGITS = frozenset("0123456789")
CONT_RE = re.compile(CONT)
EMPTYISH_RE = re.compile(EMPTYISH)
# One `key:value` item alone on a line (optionally after ` - `): a record printed one per line.
ONE_ITEM_RE = re.compile(ONE_ITEM)
VALUE_RE = re.compile(VALUE)
DECIMAL_RE = re.compile(DECIMAL)
NP_WRAP_RE = re.compile(NP_WRAP)
NP_BOOL_RE = re.compile(NP_BOOL)
THREE_DECIMALS_RE = re.compile(THREE_DECIMALS)
REPEATED_RE = re.compile(REPEATED)
LOGGER_RE = re.compile(LOGGER)
VLLM_LOGGER_RE = re.compile(VLLM_LOGGER)
PREFIX_NAME_RE = re.compile(
    r"^\((?:[A-Za-z0-9_.:\-]+ (?=[A-Za-z_][A-Za-z0-9_.\-]* pid=))?([A-Za-z_][A-Za-z0-9_.\-]*)"
)

#: a no-break space, which a copy from a web page puts for spaces (` - ` between metrics): read
#: as a space
NBSP = "\u00a0"

SUB_BITS = 20  # seq = line_no << SUB_BITS | segment index within the line
MAX_SUB = (1 << SUB_BITS) - 1


def seq_of(line_no: int, sub: int) -> int:
    """Order key of a segment: physical line, then position after `\\r` splits."""
    return (line_no << SUB_BITS) | min(sub, MAX_SUB)


def segments(line: str) -> list[str]:
    """A physical line (with or without its newline) → its `\\r`-separated segments.

    NUL bytes are dropped and one `\\r` before the newline is removed (what polars' line reader
    does), so both paths see the same segments.
    """
    if line.endswith("\n"):
        line = line[:-1]
    if "\x00" in line:
        line = line.replace("\x00", "")
    if line.endswith("\r"):
        line = line[:-1]
    return line.split("\r")


# The colour codes around a Ray prefix after a copy dropped their ESC byte (GitHub shows
# `[36m(WorkerDict pid=1)[0m text`): only there, so `[10m]` in a message stays as written.
ANSI_REMNANT_RE = re.compile(r"^\[[0-9;]{1,12}m(?=\()|(?<=\))\[0m")
# ANSI codes in caret notation (`^[[36m`): ESC as `cat -v`, `less` or an editor shows it, pasted
CARET_ANSI_RE = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")


def strip_ansi(raw: str) -> str:
    """`raw` without ANSI codes (also in caret notation, and the ESC-less remnants around a Ray
    prefix)."""
    if "\x1b" in raw:
        raw = ANSI_RE.sub("", raw)
    if "^[[" in raw:
        raw = CARET_ANSI_RE.sub("", raw)
    if raw[:1] == "[" and "m(" in raw[:16]:
        raw = ANSI_REMNANT_RE.sub("", raw, count=2)
    return raw


def split_prefix(text: str) -> tuple[str | None, str]:
    """(Ray prefix without the trailing blank, rest) of an ANSI-free segment."""
    if not text.startswith("("):
        return None, text
    m = PREFIX_RE.match(text)
    if m is None:
        return None, text
    end = m.end()
    # a process of the actor: `(vLLMHttpServer pid=1) (EngineCore_DP0 pid=2)`
    if text[end : end + 1] == "(":
        inner = INNER_PREFIX_RE.match(text, end)
        if inner is not None:
            end = inner.end()
    return text[:end].rstrip(" "), text[end:]


@functools.lru_cache(maxsize=4096)  # few distinct prefixes, one call per line
def prefix_name(prefix: str | None) -> str | None:
    """`(TaskRunner pid=1)` → `TaskRunner`; a named actor's class (`(x_0:0 WorkerDict pid=1)`)."""
    if not prefix:
        return None
    m = PREFIX_NAME_RE.match(prefix)
    return m.group(1) if m else None


def strip_tail(text: str) -> str:
    """Drop trailing blanks and Ray's dedup suffix/notice."""
    # Same as `TAIL_RE.sub("", text, count=1)`, which is tried at every position (slow on long
    # lines). Without a newline, the leftmost match starts at the blanks before the first
    # suffix (`.*` runs to the end) or else at the trailing blanks.
    if "\n" in text:
        return TAIL_RE.sub("", text, count=1)
    if "[repeated " not in text and "(Ray dedup" not in text:
        return text.rstrip(" \t")
    at = _suffix_at(text)
    return (text if at < 0 else text[:at]).rstrip(" \t")


def _suffix_at(text: str) -> int:
    """Where `SUFFIX_RE.search(text)` matches (-1: nowhere), found with `str.find`."""
    best = text.find("(Ray deduplicates logs by default.")
    i = text.find("[repeated ")
    while i >= 0 and (best < 0 or i < best):
        if REPEATED_RE.match(text, i):
            return i
        i = text.find("[repeated ", i + 1)
    return best


def match_step(text: str) -> re.Match[str] | None:
    """`STEP_RE.match(text)` (group 1: the step, group 2: the items), faster."""
    return (STEP_RE if "%|" in text else STEP_PLAIN_RE).match(text)


# A step record after other text: `训练log：step:3 - …`, `NOTE step:3 - …`, `… INFO step:3 - …`
# (not `training/global_step:3`: the record starts after a blank, punctuation or the line start).
STEP_ANYWHERE_RE = re.compile(r"(?<![\w/.\-])step:[0-9]{1,18}(?: - [^ :]+:|$)")


def find_step(text: str) -> int:
    """Where the step record in `text` starts: 0 for a step line, -1 when there is none."""
    if text.startswith("step:") or STEP_RE.match(text) is not None:
        return 0
    m = STEP_ANYWHERE_RE.search(text)
    return m.start() if m is not None else -1


def repeats(text: str) -> int:
    """How many extra times Ray says it saw the line (`[repeated Nx across cluster]`)."""
    i = text.find("[repeated ")
    while i >= 0:  # `REPEATED_RE.search`, found with `str.find`
        m = REPEATED_RE.match(text, i)
        if m:
            return int(m.group(1))
        i = text.find("[repeated ", i + 1)
    return 0


def is_tqdm(raw: str) -> bool:
    """`TQDM_RE.search(raw) is not None`, found with `str.find` (fast on very long lines)."""
    i = raw.find("%|")
    while i >= 0:  # `[0-9]{1,3}%\|[^|]*\|`: a digit before, another `|` after
        if i > 0 and raw[i - 1] in _DIGITS:
            if raw.find("|", i + 2) >= 0:
                return True
            break  # no `|` after this one: none after a later one either
        i = raw.find("%|", i + 2)
    i = raw.find("it [")
    while i >= 0:
        if i > 0 and raw[i - 1] in _DIGITS and TQDM_IT_RE.match(raw, i):
            return True
        i = raw.find("it [", i + 1)
    return False


def looks_like_continuation(ansi_free: str) -> bool:
    """Could this segment be the rest of a step line wrapped by a terminal?"""
    if ansi_free.startswith("(") and PREFIX_RE.match(ansi_free):
        return False  # a Ray-prefixed line starts a record
    return CONT_RE.match(ansi_free) is not None


def join_wrapped(head: str, tail: str) -> str:
    """Rejoin a step line cut by a terminal; blanks at the cut may have been trimmed."""
    if head.endswith(" -") and not tail.startswith(" "):
        return head + " " + tail
    if tail.startswith("- ") and not head.endswith(" "):
        return head + " " + tail
    return head + tail


# ---- values and items -----------------------------------------------------------------------


def unwrap(text: str) -> str:
    """`np.float64(0.5)` → `0.5`, `np.True_` → `True`; anything else unchanged."""
    if text.startswith("np."):
        m = NP_WRAP_RE.match(text) or NP_BOOL_RE.match(text)
        if m:
            return m.group(1)
    return text


def value_of(text: str) -> float | None:
    """An unwrapped printed value → float (None when it is not a verl value)."""
    if VALUE_RE.match(text) is None:
        return None
    if text == "True":
        return 1.0
    if text == "False":
        return 0.0
    return float(text)


def parse_value(text: str) -> float | None:
    """A printed verl value (`0.5`, `nan`, `True`, `np.float64(0.5)`, …) → float or None."""
    return value_of(unwrap(text))


class Items:
    """The parsed body of one step line."""

    __slots__ = (
        "cut_last",
        "garbled",
        "last_not_three_decimals",
        "not_three_decimals",
        "numpy_wrapped",
        "pairs",
    )

    def __init__(self) -> None:
        self.pairs: list[tuple[str, float]] = []
        self.garbled = 0  # items before the last that are not `key:number`
        self.cut_last = False  # the last item is not `key:number` (cut off)
        self.numpy_wrapped = 0  # values printed as `np.float64(…)`
        self.not_three_decimals = 0  # values not printed as `.3f`
        self.last_not_three_decimals = False  # the last value read is not `.3f`


def drop_cut_three_decimals(items: Items) -> bool:
    """In a `.3f` record (verl ≤ 0.4) a last value with fewer decimals was cut by a copy
    (`critic/values/max:0.62`): drop it. True when it was dropped."""
    if items.not_three_decimals == 1 and items.last_not_three_decimals and len(items.pairs) > 3:
        value = items.pairs[-1][1]
        if value == value and abs(value) != math.inf:
            items.pairs.pop()
            items.not_three_decimals = 0
            items.last_not_three_decimals = False
            return True
    return False


def parse_items(body: str | None, drop_last: bool = False) -> Items:
    """`k:v - k:v - …` → pairs. An unparseable last item is a truncation; others are garbage.

    A key is everything before the first `:` (verl keys have none) and may not be empty.
    `drop_last`: the line was cut off (end of file without a newline): ignore its last item.
    """
    out = Items()
    if body is None:
        return out
    items = body.split(" - ")
    last = len(items) - 1
    for i, item in enumerate(items):
        if drop_last and i == last:
            out.cut_last = True
            break
        key, colon, value = item.partition(":")
        plain = unwrap(value)
        parsed = value_of(plain) if colon and key else None
        if parsed is None:
            if i == last:
                out.cut_last = True
            else:
                out.garbled += 1
            continue
        if plain is not value:
            out.numpy_wrapped += 1
        out.last_not_three_decimals = THREE_DECIMALS_RE.match(plain) is None
        out.not_three_decimals += out.last_not_three_decimals
        out.pairs.append((key, parsed))
    return out


# ---- pprinted literals (the config dump) -----------------------------------------------------


class Brackets:
    """Tracks bracket depth over lines of Python literal text, skipping string contents."""

    __slots__ = ("depth", "quote", "started")

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""
        self.started = False

    def feed(self, text: str) -> bool:
        """Consume one line; True once every opened bracket is closed."""
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if self.quote:
                if c == "\\":
                    i += 2
                    continue
                if c == self.quote:
                    self.quote = ""
            elif c in "'\"":
                self.quote = c
            elif c in "([{":
                self.depth += 1
                self.started = True
            elif c in ")]}":
                self.depth -= 1
            i += 1
        self.quote = ""  # pprint never continues a string literal across lines
        return self.started and self.depth <= 0


_NAMES = {"inf": math.inf, "nan": math.nan, "None": None, "True": True, "False": False}


def load_yaml(text: str) -> Any:
    """A YAML document as plain data; a tag PyYAML's safe loader refuses (`!!python/tuple`, which
    `yaml.dump` writes for a tuple) is read as the plain node under it. ValueError if not YAML."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    def plain(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)  # type: ignore[arg-type]

    _Loader.add_multi_constructor("", plain)
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


def literal(text: str) -> Any:
    """`ast.literal_eval` that also takes bare `inf`/`nan` and keeps unknown objects as text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    tree = ast.parse(text.strip(), mode="eval")  # SyntaxError propagates to the caller
    return _convert(tree.body, text)


def _convert(node: ast.AST, source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {
            _convert(k, source) if k is not None else None: _convert(v, source)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_convert(e, source) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _convert(node.operand, source)
        if isinstance(value, (int, float)):
            return -value if isinstance(node.op, ast.USub) else value
    return ast.get_source_segment(source, node) or ast.dump(node)
