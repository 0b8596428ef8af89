"""Secrets out of what logscope keeps from a log: one redactor, applied once at ingest.

Training logs carry secrets (launch scripts echo `WANDB_API_KEY=...`, env dumps print cloud keys,
tracebacks quote webhook URLs). Every text a Run keeps from its source (events, skipped-line
examples and notes, string values of config segments, meta strings) passes `redact_run` in the
reader layer (`logscope.ingest.load`, and the console parser's `to_run` that `tail` uses), so the
store, every report format, the dashboard and Slack only ever see redacted text. Metric keys and
values are never touched; config keys stay, their string values are redacted.

The patterns are detect-secrets' plugin patterns (used as a library: each plugin class's
`denylist`), with a few project patterns on top (W&B and Hugging Face tokens, AWS secret keys,
GCP/Azure keys, bearer tokens, private key blocks, current OpenAI keys) and the values of keys
whose name says secret (`*_KEY`, `*_TOKEN`, `*_SECRET`, `password`, `api_key`, …) in `KEY=value`,
`key: value` and `"key": "value"` forms. What was removed is named: `[redacted: AWS secret key]`.
See docs/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from logscope.model import Event, Run

#: what every replacement starts with (also how a value already redacted is recognised)
MARK = "[redacted: "

#: detect-secrets plugins not used: not secrets in a training log (public IPs are Ray's node
#: addresses), or no pattern (entropy, keywords: the project's key-name rule does that job)
_SKIPPED_PLUGINS = frozenset(
    {"IPPublicDetector", "Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector"}
)
#: plugins whose patterns capture the secret as group 1 (others capture a prefix: replaced whole)
_GROUP_IS_SECRET = frozenset(
    {
        "AWSKeyDetector",
        "BasicAuthDetector",
        "CloudantDetector",
        "IbmCloudIamDetector",
        "IbmCosHmacDetector",
        "SoftlayerDetector",
        "NpmDetector",
    }
)
#: nicer names than detect-secrets' secret types, by plugin class
_LABELS = {
    "AWSKeyDetector": "AWS access key",
    "BasicAuthDetector": "password in URL",
    "SlackDetector": "Slack token",
    "JwtTokenDetector": "JSON web token",
    "PrivateKeyDetector": "private key",
    "OpenAIDetector": "OpenAI key",
    "GitHubTokenDetector": "GitHub token",
}

_NAME = r"[A-Za-z0-9_.\-]*"
#: key names whose value is a secret (case-insensitive, matched on the whole name)
_SECRET_NAME = re.compile(
    r"(?:.*[_.\-])?(?:key|token|secret|password|passwd|api_?key|access_?key)"
    r"|.*(?:password|passwd|secret|apikey|api_key)",
    re.IGNORECASE,
)
#: names that end like a secret's but hold none: verl's data keys, tokenizers' special tokens
_NOT_SECRET_LEAF = frozenset(
    {
        "prompt_key",
        "response_key",
        "image_key",
        "video_key",
        "audio_key",
        "reward_fn_key",
        "teacher_key",
        "key",
        "full_key",  # OmegaConf's errors name the config key they are about
        "pad_token",
        "eos_token",
        "bos_token",
        "unk_token",
        "sep_token",
        "cls_token",
        "mask_token",
        "chat_template_key",
        "sort_key",
        "group_key",
        "metric_key",
        "cache_key",
        "monitor_key",
    }
)
# A value: quoted (to its closing quote) or bare (to whitespace or a delimiter).
_VALUE = r"""(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>(?!\[redacted)[^\s"',;}\])&]+))"""
_KEY_VALUE = re.compile(
    rf"""(?<![A-Za-z0-9_.\-])(?P<q>["']?)(?P<name>{_NAME}[A-Za-z0-9])(?P=q)"""
    rf"""(?P<sep>\s*(?::=|=>|=|:)\s*){_VALUE}"""
)


def _group_sub(pattern: re.Pattern[str], label: str, group: int | str = 1) -> Callable[[str], str]:
    """Replace `group` of each match (the secret) and keep the text around it."""
    repl = f"{MARK}{label}]"

    def sub(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            start, end = m.span(group)
            if start < 0:
                return m.group(0)
            s0 = m.start()
            return m.group(0)[: start - s0] + repl + m.group(0)[end - s0 :]

        return pattern.sub(one, text)

    return sub


_EDGE = " \t=:\"'"


def _whole_sub(pattern: re.Pattern[str], label: str) -> Callable[[str], str]:
    """Replace each whole match, keeping the delimiters some patterns match at their edges."""
    repl = f"{MARK}{label}]"

    def one(m: re.Match[str]) -> str:
        found = m.group(0)
        core = found.strip(_EDGE)
        if not core:
            return found
        head = found[: found.index(core)]
        return head + repl + found[len(head) + len(core) :]

    return lambda text: pattern.sub(one, text)


# Project patterns, applied before detect-secrets' (more specific, better labels).
_PROJECT: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    # a whole PEM block (a GCP service-account JSON holds one as "private_key": "-----BEGIN…")
    (
        r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END[A-Z ]*PRIVATE KEY"
        r"(?: BLOCK)?-----|[^\"']*)",
        "private key",
        0,
        ("pem",),
    ),
    (
        r"(?i)(?<![A-Za-z0-9])(?:WANDB_API_KEY\s*[=:]\s*[\"']?|wandb\s+login\s+(?:--\S+\s+)*)"
        r"((?:local-)?[0-9a-f]{40,})",
        "W&B API key",
        1,
        ("wandb",),
    ),
    (r"(?<![A-Za-z0-9_])(hf_[A-Za-z0-9]{30,})", "Hugging Face token", 1, ("hf",)),
    (
        r"(?i)aws.{0,20}?secret.{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "AWS secret key",
        1,
        ("aws",),
    ),
    (r"(?<![A-Za-z0-9])(AIza[0-9A-Za-z_\-]{35})", "GCP API key", 1, ("gcp",)),
    (
        r"(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*(?!\[redacted)([^;\s\"']+)",
        "Azure key",
        1,
        ("kw", "azure"),
    ),
    (r"(?i)[?&]sig=([A-Za-z0-9%+/=]{20,})", "Azure SAS signature", 1, ("azure",)),
    (
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+",
        "Discord webhook URL",
        0,
        ("url",),
    ),
    (
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+",
        "Slack webhook URL",
        0,
        ("url",),
    ),
    (r"(?<![A-Za-z0-9_])(github_pat_[A-Za-z0-9_]{22,})", "GitHub token", 1, ("gh",)),
    (r"(?<![A-Za-z0-9_\-])(sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{20,})", "OpenAI key", 1, ("sk",)),
    (r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{8,}=*)", "bearer token", 1, ("bearer",)),
    (
        r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}=*)",
        "basic auth",
        1,
        ("basic",),
    ),
    (r"(eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*)", "JSON web token", 1, ("jwt",)),
)


Redactor = tuple[frozenset[str] | None, Callable[[str], str]]  # (hints it needs: None = any)


@cache
def _project_redactors() -> tuple[Redactor, ...]:
    """The project's patterns (no detect-secrets import)."""
    subs: list[Redactor] = []
    for pattern, label, group, needs in _PROJECT:
        compiled = re.compile(pattern, re.DOTALL)
        sub = _group_sub(compiled, label, group) if group else _whole_sub(compiled, label)
        subs.append((frozenset(needs), sub))
    return tuple(subs)


@cache
def _plugin_redactors() -> tuple[Redactor, ...]:
    """Every detect-secrets plugin pattern (importing detect-secrets costs ~0.3 s CPU: only for
    a text holding a hint one of them needs)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    subs: list[Redactor] = []
    for secret_type, plugin in sorted(get_mapping_from_secret_type_to_class().items()):
        if plugin.__name__ in _SKIPPED_PLUGINS:
            continue
        label = _LABELS.get(plugin.__name__, secret_type)
        needs = _PLUGIN_NEEDS.get(plugin.__name__)  # one added later: whenever plugins run
        for compiled in getattr(plugin, "denylist", ()) or ():
            if compiled.groups and plugin.__name__ in _GROUP_IS_SECRET:
                sub = _group_sub(compiled, label, 1)
            else:
                sub = _whole_sub(compiled, label)
            subs.append((None if needs is None else frozenset(needs), sub))
    return tuple(subs)


def _redactors(hints: set[str] | None = None) -> tuple[Redactor, ...]:
    """Project patterns, then detect-secrets' plugin patterns, then the key-name rule; with
    `hints`, the plugins only when one of them needs one of the hints."""
    plugins = _plugin_redactors() if hints is None or hints & _PLUGIN_HINTS else ()
    return (*_project_redactors(), *plugins, (frozenset({"kw"}), _secret_values))


def says_secret(name: str) -> bool:
    """Does a key's name say its value is a secret (`HF_TOKEN`, `db.password`, `api_key`)?"""
    leaf = re.split(r"[./]", name)[-1]
    if leaf.lower() in _NOT_SECRET_LEAF:
        return False
    return _SECRET_NAME.fullmatch(leaf) is not None


def _secret_values(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        kind = "dq" if m.group("dq") is not None else "sq" if m.group("sq") is not None else "bare"
        value = m.group(kind)
        if not _worth_hiding(value) or not says_secret(m.group("name")):
            return m.group(0)
        start, end = m.span(kind)
        s0 = m.start()
        return (
            f"{m.group(0)[: start - s0]}{MARK}value of {m.group('name')}]{m.group(0)[end - s0 :]}"
        )

    return _KEY_VALUE.sub(one, text)


_PLACEHOLDERS = frozenset({"none", "null", "true", "false", "***", "????", "<unset>", "unset"})


def _worth_hiding(value: str) -> bool:
    """A value that can be a secret: not empty, a number, a placeholder or already redacted."""
    v = value.strip()
    if len(v) < 4 or v.lower() in _PLACEHOLDERS or v.startswith(("[redacted", "${", "$")):
        return False
    if MARK in v:
        return False
    try:
        float(v)
    except ValueError:
        return True
    return False


# What each pattern needs to have a chance (a literal, case-insensitive, or a fixed shape): the
# hints found in a text (one scan) select the patterns that run; a text with none is returned as
# it is (most texts hold none). `tests/test_redaction.py` checks this equals running them all.
_HINT_LITERALS: dict[str, tuple[str, ...]] = {  # lower case, found in the lower-cased text
    "url": ("://",),
    "wandb": ("wandb",),
    "hf": ("hf_",),
    "aws": ("aws", "a3t", "abia", "acca", "akia", "asia"),
    "gcp": ("aiza",),
    "azure": ("sharedaccess", "sig="),
    "gh": ("github_pat",),
    "sk": ("sk-",),
    "bearer": ("bearer",),
    "basic": ("authorization",),
    "jwt": ("eyj",),
    "pem": ("private", "putty"),
    "slack": ("xox",),
    "mailchimp": ("-us",),
    "pypi": ("pypi-",),
    "sendgrid": ("sg.",),
    "square": ("sq0csp",),
    "stripe": ("k_live",),
    "gitlab": ("gr1348941",),
    "artifactory": ("akc",),
}
_KEYWORDS = ("key", "token", "secret", "pass", "pwd", "pw", "credential")
_LITERAL = re.compile(
    "|".join(re.escape(x) for x in (*_KEYWORDS, *(x for v in _HINT_LITERALS.values() for x in v)))
)
#: "kw": a secret-ish word right before a separator (`api_key=`, `"token": `, `password :`, or
#: spaces: `token abc…`) — what the key-name rule and detect-secrets' keyword-based patterns need
_KW_SEP = re.compile(
    r"(?:key|token|secret|password|passwd|pass|pwd|pw|credentials?)[\"'\]]{0,2}(?:\s*[=:]| +)"
)
#: case-sensitive shapes, each a necessary part of its patterns that a regex finds quickly
_HINT_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        ("gh", r"gh[pousr]_"),
        ("gitlab", r"gl[a-z]{2,6}-"),
        ("artifactory", r"AP[\dA-F]"),
        ("twilio", r"AC[a-z0-9]{32}"),
        ("twilio", r"SK[a-z0-9]{32}"),
        ("discord", r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
        ("telegram", r":[0-9A-Za-z_-]{35}"),
    )
)
#: the hints each detect-secrets plugin's patterns need (one of them)
_PLUGIN_NEEDS: dict[str, tuple[str, ...]] = {
    "ArtifactoryDetector": ("artifactory",),
    "AWSKeyDetector": ("aws",),
    "AzureStorageKeyDetector": ("kw",),  # AccountKey=
    "BasicAuthDetector": ("url",),
    "CloudantDetector": ("kw", "url"),
    "DiscordBotTokenDetector": ("discord",),
    "GitHubTokenDetector": ("gh",),
    "GitLabTokenDetector": ("gitlab",),
    "IbmCloudIamDetector": ("kw",),
    "IbmCosHmacDetector": ("kw",),
    "JwtTokenDetector": ("jwt",),
    "MailchimpDetector": ("mailchimp",),
    "NpmDetector": ("kw",),  # _authToken=
    "OpenAIDetector": ("sk",),
    "PrivateKeyDetector": ("pem",),
    "PypiTokenDetector": ("pypi",),
    "SendGridDetector": ("sendgrid",),
    "SlackDetector": ("slack", "url"),
    "SoftlayerDetector": ("kw", "url"),
    "SquareOAuthDetector": ("square",),
    "StripeDetector": ("stripe",),
    "TelegramBotTokenDetector": ("telegram",),
    "TwilioKeyDetector": ("twilio",),
}
#: the hints some detect-secrets plugin needs (a test checks every plugin is in `_PLUGIN_NEEDS`)
_PLUGIN_HINTS = frozenset(h for needs in _PLUGIN_NEEDS.values() for h in needs)


def _hints(text: str) -> set[str]:
    """The hints `text` holds (empty for most texts: then no pattern can match)."""
    low = text.lower()
    found = {name for name, rx in _HINT_SHAPES if rx.search(text)}
    if _LITERAL.search(low) is None:
        return found
    found.update(
        name for name, literals in _HINT_LITERALS.items() if any(x in low for x in literals)
    )
    if _KW_SEP.search(low):
        found.add("kw")
    return found


def redact(text: str) -> str:
    """`text` with every secret found replaced by `[redacted: what it was]`."""
    found = _hints(text) if text else None
    if not found:
        return text
    for needs, sub in _redactors(found):
        if needs is None or not needs.isdisjoint(found):
            text = sub(text)
    return text


def _redact_all(text: str) -> str:
    """`redact` without the hint selection: every pattern on the text (what tests compare)."""
    for _, sub in _redactors():
        text = sub(text)
    return text


def redact_value(value: Any, name: str | None = None) -> Any:
    """A config or meta value with every string in it redacted (keys stay); a string under a
    key whose name says secret is replaced whole."""
    if isinstance(value, str):
        text = redact(value)
        if text == value and name is not None and says_secret(name) and _worth_hiding(value):
            return f"{MARK}value of {name}]"
        return text
    if isinstance(value, dict):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, name) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v, name) for v in value)
    return value


def redact_run(run: Run) -> Run:
    """Redact, in place, every text `run` keeps from its source; returns `run`.

    Idempotent (a redacted text is left as it is), so a run read twice through the reader layer
    costs only the scan.
    """
    run.events = [_event(e) for e in run.events]
    stats = run.parse_stats
    stats.skipped_examples = [(n, redact(t)) for n, t in stats.skipped_examples]
    stats.notes = [redact(n) for n in stats.notes]
    for segment in run.config_segments:
        segment.config = redact_value(segment.config)
    run.meta = redact_value(run.meta)
    return run


def redact_runs(runs: Iterable[Run]) -> list[Run]:
    return [redact_run(r) for r in runs]


def _event(event: Event) -> Event:
    text = redact(event.text)
    if text == event.text:
        return event
    return Event(event.line_no, event.step_hint, event.kind, text)
