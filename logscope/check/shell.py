"""Read a launch script or command line the way a POSIX shell would, far enough to find verl.

What is understood: comments, `\\` line continuations, single/double quotes and backslash
escapes, `$VAR`/`${VAR}`/`${VAR:-default}` expansion, several commands (`;`, `&&`, `||`,
`|`, `&`, newlines), redirections (`2>&1`, `> x.log`, `| tee x.log`), env prefixes
(`PYTHONUNBUFFERED=1 python3 …`), `export VAR=…`, and `bash -c '…'`.

Variables: a `VAR=value` (or `export VAR=value`) earlier in the script is substituted; a variable
the script never assigns stays symbolic (`$VAR` is kept as text), so a lint never depends on the
shell logscope happens to run in. Callers may pass `env=` to supply values explicitly.
Expansions like `$(...)` and backticks are kept as text. Not understood (kept as plain words):
functions, here-documents, arithmetic, arrays.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from logscope.exceptions import ConfigParseError

# ---- lexing --------------------------------------------------------------------------------

_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
_REDIRECTS = (">>", ">|", ">&", "<<<", "<<", "<&", "<>", "&>>", "&>", ">", "<")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


@dataclass
class _Piece:
    """Part of a word: literal text, or a variable reference to expand later."""

    text: str  # literal text, or the reference as written (`$X`, `${X:-d}`) for vars
    var: str | None = None  # variable name when this piece is a reference
    op: str | None = None  # `:-`, `-`, `:=`, `=` for `${X:-default}` forms
    default: str = ""
    quoted: bool = False  # inside double quotes (no field splitting)
    arith: str | None = None  # the expression of `$(( … ))`, evaluated at expansion


@dataclass
class _Word:
    pieces: list[_Piece]
    line: int
    raw: str  # the word's source text, for error messages
    start: int = 0  # offset of `raw` in the lexed text

    def is_assignment(self) -> bool:
        first = self.pieces[0] if self.pieces else None
        return bool(
            first is not None
            and first.var is None
            and not first.quoted
            and _ASSIGNMENT.match(first.text)
        )


@dataclass
class _Op:
    text: str
    line: int


class _Lexer:
    def __init__(self, text: str, path: str | None) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.path = path

    def error(self, message: str, token: str) -> ConfigParseError:
        where = f"line {self.line}: " if self.path is None else ""
        path = f"{self.path}:{self.line}" if self.path else None
        return ConfigParseError(where + message, token=token, path=path)

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.s[j] if j < len(self.s) else ""

    def tokens(self) -> list[_Word | _Op]:
        out: list[_Word | _Op] = []
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":  # line continuation between words
                self.i += 2
                self.line += 1
                continue
            if c in " \t\r":
                self.i += 1
                continue
            if c == "\n":
                out.append(_Op("\n", self.line))
                self.i += 1
                self.line += 1
                continue
            if c == "#":
                while self.i < len(self.s) and self.peek() != "\n":
                    self.i += 1
                continue
            redirect = self._redirect(out)
            if redirect:
                continue
            op = next((o for o in _OPERATORS if self.s.startswith(o, self.i)), None)
            if op:
                out.append(_Op(op, self.line))
                self.i += len(op)
                continue
            out.append(self._word())
        return out

    def _redirect(self, out: list[_Word | _Op]) -> bool:
        """Consume `[n]>target`, `2>&1`, `&>file` …; emits a `redirect` op (targets dropped)."""
        m = re.match(r"\d*", self.s[self.i :])
        j = self.i + (len(m.group(0)) if m else 0)
        op = next((r for r in _REDIRECTS if self.s.startswith(r, j)), None)
        if op is None:
            return False
        if j > self.i and op.startswith("&"):
            return False
        line = self.line
        self.i = j + len(op)
        if op in (">&", "<&") and re.match(r"\d+-?|-", self.s[self.i :]):
            self.i += len(re.match(r"\d+-?|-", self.s[self.i :]).group(0))  # type: ignore[union-attr]
        else:
            while self.peek() and self.peek() in " \t":
                self.i += 1
            if self.i >= len(self.s) or self.peek() in "\n;&|()<>":
                raise self.error(f"redirection {op!r} without a target", op)
            self._word()  # the target (a file name): not part of the command
        out.append(_Op("redirect", line))
        return True

    def _word(self) -> _Word:
        start, line = self.i, self.line
        pieces: list[_Piece] = []
        lit: list[str] = []

        def flush(quoted: bool = False) -> None:
            if lit:
                pieces.append(_Piece("".join(lit), quoted=quoted))
                lit.clear()

        while self.i < len(self.s):
            c = self.peek()
            if c in " \t\r\n;&|()<>":
                break
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.i += 2
                    self.line += 1
                    continue
                if nxt == "":
                    self.i += 1
                    continue
                flush()
                pieces.append(_Piece(nxt))  # escaped: literal, never expanded
                self.i += 2
                continue
            if c == "'":
                flush()
                end = self._closing_mark("'", "single quote", start)
                text = self.s[self.i + 1 : end]
                self.line += text.count("\n")
                pieces.append(_Piece(text, quoted=True))
                self.i = end + 1
                continue
            if c == '"':
                flush()
                self._double_quoted(pieces, start)
                continue
            if c == "$":
                flush()
                pieces.append(self._dollar(quoted=False, start=start))
                continue
            if c == "`":
                flush()
                end = self._closing_mark("`", "backquote", start)
                pieces.append(_Piece(self.s[self.i : end + 1]))
                self.i = end + 1
                continue
            lit.append(c)
            self.i += 1
        flush()
        return _Word(pieces, line, self.s[start : self.i], start)

    def _closing_mark(self, mark: str, what: str, start: int) -> int:
        """Index of the next `mark` after the one at `self.i` (an unterminated `what` is an error)."""
        end = self.s.find(mark, self.i + 1)
        if end < 0:
            raise self.error(f"unterminated {what}", self.s[start : start + 60])
        return end

    def _double_quoted(self, pieces: list[_Piece], start: int) -> None:
        self.i += 1
        lit: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise self.error("unterminated double quote", self.s[start : start + 60])
            c = self.peek()
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.peek(1) and self.peek(1) in '$`"\\\n':
                if self.peek(1) == "\n":
                    self.line += 1
                else:
                    lit.append(self.peek(1))
                self.i += 2
                continue
            if c == "$":
                if lit:
                    pieces.append(_Piece("".join(lit), quoted=True))
                    lit = []
                pieces.append(self._dollar(quoted=True, start=start))
                continue
            if c == "\n":
                self.line += 1
            lit.append(c)
            self.i += 1
        pieces.append(_Piece("".join(lit), quoted=True))

    def _closing(self, opener: str, closer: str, start: int) -> int:
        """Index of the `closer` balancing the `opener` just after the `$` at `self.i`."""
        s, depth = self.s, 0
        for j in range(self.i + 1, len(s)):
            if s[j] == opener:
                depth += 1
            elif s[j] == closer:
                depth -= 1
                if depth == 0:
                    return j
        raise self.error(f"unterminated ${opener}...{closer}", s[start : start + 60])

    def _dollar(self, quoted: bool, start: int) -> _Piece:
        s, i = self.s, self.i
        nxt = self.peek(1)
        if nxt == "{":
            j = self._closing("{", "}", start)
            body, raw = s[i + 2 : j], s[i : j + 1]
            self.i = j + 1
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+?])(.*))?", body, re.S)
            if not m:
                return _Piece(raw, quoted=quoted)  # ${#X}, ${X/a/b}, …: kept as written
            return _Piece(
                raw, var=m.group(1), op=m.group(2), default=m.group(3) or "", quoted=quoted
            )
        if nxt == "(":
            j = self._closing("(", ")", start)
            self.i = j + 1
            raw = s[i : j + 1]
            if raw.startswith("$((") and raw.endswith("))"):
                return _Piece(raw, quoted=quoted, arith=raw[3:-2])
            return _Piece(raw, quoted=quoted)
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return _Piece(s[i : m.end()], var=m.group(0), quoted=quoted)
        if nxt and nxt in "0123456789@*#?$!-":
            self.i = i + 2
            return _Piece(s[i : i + 2], quoted=quoted)
        self.i = i + 1
        return _Piece("$", quoted=quoted)


# ---- commands ------------------------------------------------------------------------------

_KEYWORDS = {
    "if",
    "then",
    "else",
    "elif",
    "do",
    "while",
    "until",
    "!",
    "{",
    "time",
    "exec",
    "nohup",
    "command",
    "builtin",
}
_CLOSERS = {"fi", "done", "esac", "}"}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}


@dataclass(frozen=True)
class Span:
    """Where an argument came from in the script: its word's offsets, and whether the word
    expanded to this argument alone (`$EXTRA` holding `a=1 b=2` does not)."""

    start: int
    end: int
    solo: bool = True

    def shifted(self, offset: int) -> Span:
        return Span(self.start + offset, self.end + offset, self.solo)


@dataclass
class Command:
    """One simple command after expansion: its words, its env prefix, where it starts.

    `spans`: per argv entry, the source word it came from (empty for a command given as argv).
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    line: int = 1
    spans: list[Span] = field(default_factory=list)


def parse_script(
    text: str, env: dict[str, str] | None = None, path: str | None = None
) -> list[Command]:
    """Every simple command of a script, expanded with the variables known at that point."""
    variables: dict[str, str] = dict(env or {})
    return _commands(_Lexer(text, path).tokens(), variables, path)


def _commands(
    tokens: list[_Word | _Op], variables: dict[str, str], path: str | None
) -> list[Command]:
    out: list[Command] = []
    current: list[_Word] = []

    def finish() -> None:
        if current:
            command = _simple_command(list(current), variables, path)
            if command is not None:
                out.append(command)
            current.clear()

    for tok in tokens:
        if isinstance(tok, _Op):
            if tok.text != "redirect":
                finish()
        else:
            current.append(tok)
    finish()
    return out


def _simple_command(
    words: list[_Word], variables: dict[str, str], path: str | None
) -> Command | None:
    # Leading shell keywords (`then python …`, `do …`) are not part of the command.
    while words and _literal(words[0]) in _KEYWORDS:
        words = words[1:]
    if not words or _literal(words[0]) in _CLOSERS:
        return None
    head = _literal(words[0])
    if head in ("for", "case", "select", "function"):
        return None
    env: dict[str, str] = {}
    i = 0
    while i < len(words) and words[i].is_assignment():
        name, value = _expand_assignment(words[i], variables)
        env[name] = value
        i += 1
    line = words[0].line
    if i == len(words):  # only assignments: they set shell variables
        variables.update(env)
        return None
    argv: list[str] = []
    spans: list[Span] = []
    for word in words[i:]:
        fields = _expand(word, variables)
        argv.extend(fields)
        end = word.start + len(word.raw)
        spans.extend(Span(word.start, end, len(fields) == 1) for _ in fields)
    if argv and argv[0] in _DECLARE:
        for word in words[i + 1 :]:
            if word.is_assignment():
                name, value = _expand_assignment(word, variables)
                variables[name] = value
        return None
    return Command(argv=argv, env=env, line=line, spans=spans)


def _literal(word: _Word) -> str | None:
    """The word's text when it has no expansions and no quotes (for keyword checks)."""
    if all(p.var is None and not p.quoted for p in word.pieces):
        return "".join(p.text for p in word.pieces)
    return None


def _expand_assignment(word: _Word, variables: dict[str, str]) -> tuple[str, str]:
    first = word.pieces[0]
    m = _ASSIGNMENT.match(first.text)
    assert m is not None
    name = m.group(0).rstrip("+=")
    rest = _Word([_Piece(first.text[m.end() :]), *word.pieces[1:]], word.line, word.raw)
    value = "".join(_expand(rest, variables, split=False))
    if m.group(0).endswith("+="):
        value = variables.get(name, "") + value
    return name, value


def _expand(word: _Word, variables: dict[str, str], split: bool = True) -> list[str]:
    """Expand variables; unquoted expansions are split on whitespace like a shell would."""
    fields = [""]
    have = False  # the last field has content (or an empty quoted string)
    for p in word.pieces:
        if p.arith is not None:
            result = _arithmetic(p.arith, variables)
            fields[-1] += p.text if result is None else str(result)
            have = True
            continue
        value = None if p.var is None else _lookup(p, variables)
        if p.var is None or value is None:  # literal, or unset variable kept symbolic
            fields[-1] += p.text
            have = True
        elif p.quoted or not split or "$(" in value or "`" in value:
            # (a value holding an unexpanded substitution stays one word)
            fields[-1] += value
            have = True
        else:
            parts = value.split()
            if not parts:
                continue
            if value[0].isspace() and have:
                fields.append("")
            fields[-1] += parts[0]
            fields.extend(parts[1:])
            have = True
            if value[-1].isspace():
                fields.append("")
                have = False
    if not split:
        return ["".join(fields)]
    if not have:
        fields.pop()
    return fields


def _arithmetic(expression: str, variables: dict[str, str]) -> int | None:
    """Evaluate `$(( … ))` integer arithmetic over known variables; None when anything is unknown."""
    import ast

    def name_value(m: re.Match[str]) -> str:
        value = variables.get(m.group(1))
        return value.strip() if value is not None and re.fullmatch(r"\s*-?\d+\s*", value) else "?"

    text = re.sub(r"\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name_value, expression)
    if "?" in text or not re.fullmatch(r"[\d\s+\-*/%()]+", text):
        return None
    try:
        tree = ast.parse(text.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b != 0:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C-style truncation
                return q if isinstance(node.op, ast.FloorDiv) else a - b * q
        raise ValueError("unsupported")

    try:
        return ev(tree)
    except (ValueError, RecursionError):
        return None


def _lookup(piece: _Piece, variables: dict[str, str]) -> str | None:
    value = variables.get(piece.var or "")
    op = piece.op
    if op is None:
        return value
    empty = value is None or (op.startswith(":") and value == "")
    if op in (":-", "-"):
        return _expand_text(piece.default, variables) if empty else value
    if op in (":=", "="):
        if empty:
            value = _expand_text(piece.default, variables)
            variables[piece.var or ""] = value
        return value
    if op in (":+", "+"):
        return "" if empty else _expand_text(piece.default, variables)
    return value  # `:?`: error if unset in a shell; here: symbolic when unset


def _expand_text(text: str, variables: dict[str, str]) -> str:
    words = [w for w in _Lexer(text, None).tokens() if isinstance(w, _Word)]
    return " ".join(v for w in words for v in _expand(w, variables, split=False))


# ---- finding verl ----------------------------------------------------------------------------

_NOT_TRAINERS = {"main_generation", "main_eval", "main_generation_server", "fsdp_sft_trainer"}


@dataclass
class VerlCommand:
    """A verl trainer invocation: what runs it, the entry (module or script), and its args.

    `spans[i]`: where `args[i]` is in the script (None when unknown: a command given as argv,
    or inside a `bash -c "…"` whose escapes shift offsets); `entry_span`: the entry's word.
    `quoting`: `'` when the command sits inside a single-quoted `bash -c '…'` (so an edit must
    not use single quotes).
    """

    argv: list[str]
    entry: str
    prefix: list[str]  # argv up to and including the entry (`python3 -m verl.trainer.main_ppo`)
    args: list[str]  # everything after the entry: Hydra overrides and flags
    env: dict[str, str]
    line: int
    spans: list[Span | None] = field(default_factory=list)
    entry_span: Span | None = None
    quoting: str = ""


def is_verl_module(name: str) -> bool:
    """`verl.trainer.main_ppo`, `recipe.dapo.main_dapo`, `verl.recipe.x.main_y`,
    `verl.experimental.fully_async_policy.fully_async_main`, …"""
    parts = name.split(".")
    if len(parts) < 2 or not all(re.fullmatch(r"\w+", p) for p in parts):
        return False
    last = parts[-1]
    if last in _NOT_TRAINERS:
        return False
    return (last.startswith("main_") or last.endswith("_main")) and parts[0] in ("verl", "recipe")


def is_verl_script(arg: str) -> bool:
    """`verl/trainer/main_ppo.py`, `recipe/dapo/main_dapo.py` (any leading path)."""
    norm = arg.replace("\\", "/")
    if not norm.endswith(".py"):
        return False
    module = norm[:-3].strip("./").replace("/", ".")
    parts = module.split(".")
    for k in range(len(parts)):
        if parts[k] in ("verl", "recipe") and is_verl_module(".".join(parts[k:])):
            return True
    return False


def find_verl(command: Command) -> VerlCommand | None:
    """The verl trainer call inside `command` (behind python, torchrun, ray job submit, uv …)."""
    argv = command.argv
    for i, arg in enumerate(argv):
        if arg == "-m" and i + 1 < len(argv) and is_verl_module(argv[i + 1]):
            return _verl_at(command, argv[i + 1], i + 2)
        if arg.startswith("-m") and len(arg) > 2 and is_verl_module(arg[2:]):
            return _verl_at(command, arg[2:], i + 1)
        if is_verl_script(arg):
            return _verl_at(command, arg, i + 1)
    return None


def _verl_at(command: Command, entry: str, n_prefix: int) -> VerlCommand:
    """The VerlCommand whose prefix is `command.argv[:n_prefix]`."""
    argv = command.argv
    spans: list[Span | None] = list(command.spans) or [None] * len(argv)
    return VerlCommand(
        argv,
        entry,
        argv[:n_prefix],
        argv[n_prefix:],
        command.env,
        command.line,
        spans[n_prefix:],
        spans[n_prefix - 1],
    )


_SHELLS = {"bash", "sh", "zsh", "dash"}


def verl_commands(
    text: str, env: dict[str, str] | None = None, path: str | None = None
) -> list[VerlCommand]:
    """Every verl trainer call in a script (including inside `bash -c '…'`)."""
    found: list[VerlCommand] = []
    for command in parse_script(text, env, path):
        hit = find_verl(command)
        if hit is not None:
            found.append(hit)
            continue
        argv = command.argv
        if argv and os.path.basename(argv[0]) in _SHELLS and "-c" in argv[1:]:
            k = argv.index("-c")
            if k + 1 < len(argv):
                offset = _literal_offset(text, command, k + 1)
                for inner in verl_commands(argv[k + 1], env, path):
                    inner.line = command.line
                    _move(inner, offset)
                    found.append(inner)
    return found


def _literal_offset(text: str, command: Command, k: int) -> int | None:
    """Offset of argv[k]'s text in `text` when its word is one plain `'…'` (else None)."""
    if k >= len(command.spans):
        return None
    span = command.spans[k]
    if span.solo and text[span.start : span.end] == f"'{command.argv[k]}'":
        return span.start + 1
    return None


def _move(inner: VerlCommand, offset: int | None) -> None:
    """Positions of a `bash -c` command, from its own text to the script's (or unknown)."""
    if offset is None:
        inner.spans = [None] * len(inner.args)
        inner.entry_span = None
        return
    inner.spans = [s.shifted(offset) if s else None for s in inner.spans]
    inner.entry_span = inner.entry_span.shifted(offset) if inner.entry_span else None
    inner.quoting = "'"


def join_command(argv: list[str]) -> str:
    """Shell-quote argv back into one line (for messages and `--fix`)."""
    return " ".join(quote(a) for a in argv)


def quote(arg: str, inside: str = "") -> str:
    """Quote only what a shell would change; keep `$VAR` expandable.

    `inside="'"`: the word goes inside a single-quoted `bash -c '…'`, so never use `'`.
    """
    if arg and re.fullmatch(r"[\w@%+=:,./\-]+", arg):
        return arg
    if re.fullmatch(r"~[\w.]+(=[\w.\-]*)?", arg):  # Hydra delete `~key`: no user named so
        return arg
    if "$" in arg or inside == "'":
        return '"' + re.sub(r'(["\\`])', r"\\\1", arg) + '"'
    return shlex.quote(arg)  # the same single quoting (its safe characters are a subset of ours)
