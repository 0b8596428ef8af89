"""Every source logscope cites, and `cite`: a short citation → what a user can open.

Detectors, rules and docstrings write short ids; `cite` turns each into a readable source:

- `seed:ppo-tuning §3.3` → the article by title (Chinese, as published), an English gloss and
  where it was published, then the section;
- `verl:trainer/ppo/core_algos.py` → its GitHub URL (a folder → its tree; `verl:docs/…` → the
  verl docs page); `verl#7817` → the verl issue/PR URL;
- `verl-recipe:dapo/dapo_ray_trainer.py` → the recipe's GitHub URL (verl's recipes repository);
- `vllm:…`, `ray:…`, `hydra:…`, `omegaconf:…`, `pytorch:…`, `sglang:…`, `linux:…` → their docs
  (or, for `vllm:` paths that are not docs, vLLM's source on GitHub);
- `paper:ppo` → the paper's title, authors and arXiv URL.

Text around an id (a section, a note in parentheses) stays as written, and `cite` is idempotent,
so citations can be resolved wherever they are built. `unresolved` lists what `cite` cannot turn
into something openable (tests use it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Article:
    """A published article logscope's advice quotes."""

    title: str  # as published
    gloss: str  # the title in English
    name: str  # prose calls it "the <name> article"
    where: str

    def label(self) -> str:
        return f'Article "{self.title}" (the {self.name} article, "{self.gloss}", {self.where})'


@dataclass(frozen=True)
class Paper:
    title: str
    authors: str
    url: str

    def label(self) -> str:
        return f'Paper "{self.title}" ({self.authors}): {self.url}'


#: The two articles the tuning rules come from (`seed:<key>`). Neither copy names an author or
#: a URL; both end with CSDN's promotion block, so they were published on CSDN. The titles are
#: what to search for.
ARTICLES: dict[str, Article] = {
    "grpo-pitfalls": Article(
        title="verl GRPO训练避雷：这些参数千万别设错",
        gloss="verl GRPO training pitfalls: parameters you must not set wrong",
        name="GRPO",
        where="CSDN",
    ),
    "ppo-tuning": Article(
        title="verl实战分享：如何优化PPO参数提升训练效率",
        gloss="verl in practice: how to tune PPO parameters for training efficiency",
        name="PPO",
        where="CSDN",
    ),
}

PAPERS: dict[str, Paper] = {
    "ppo": Paper(
        "Proximal Policy Optimization Algorithms",
        "Schulman et al., 2017",
        "https://arxiv.org/abs/1707.06347",
    ),
    "dapo": Paper(
        "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
        "Yu et al., 2025",
        "https://arxiv.org/abs/2503.14476",
    ),
}

VERL_REPO = "https://github.com/volcengine/verl"
VLLM_REPO = "https://github.com/vllm-project/vllm"
#: the recipes verl moved out of its repository (DAPO, …)
VERL_RECIPE_REPO = "https://github.com/verl-project/verl-recipe"


def _verl(path: str) -> str:
    if path.startswith("docs/"):
        page, _, anchor = path[5:].partition("#")
        page = page.removesuffix(".md").removesuffix(".rst")  # the source file's name
        anchor = f"#{anchor}" if anchor else ""
        return f"verl docs: https://verl.readthedocs.io/en/latest/{page}.html{anchor}"
    kind = "blob" if _is_file(path) else "tree"
    return f"verl source: {VERL_REPO}/{kind}/main/verl/{path}"


def _vllm(path: str) -> str:
    if path.startswith("docs/"):
        return f"vLLM docs: https://docs.vllm.ai/en/latest/{path[5:]}.html"
    kind = "blob" if _is_file(path) else "tree"
    return f"vLLM source: {VLLM_REPO}/{kind}/main/vllm/{path}"


def _verl_recipe(path: str) -> str:
    kind = "blob" if _is_file(path) else "tree"
    return f"verl-recipe source: {VERL_RECIPE_REPO}/{kind}/main/{path}"


def _is_file(path: str) -> bool:
    return "." in path.rsplit("/", 1)[-1]


def _page(label: str, base: str, suffix: str = ".html") -> Callable[[str], str]:
    def render(path: str) -> str:
        page, _, anchor = path.partition("#")
        return f"{label}: {base}{page}{suffix}" + (f"#{anchor}" if anchor else "")

    return render


#: `prefix:path` → readable source. Paths are the site's own (a docs page without its suffix).
SITES: dict[str, Callable[[str], str]] = {
    "verl-recipe": _verl_recipe,  # before "verl": the alternation tries sites in order
    "verl": _verl,
    "vllm": _vllm,
    "ray": _page("Ray docs", "https://docs.ray.io/en/latest/"),
    "hydra": _page("Hydra docs", "https://hydra.cc/docs/", "/"),
    "omegaconf": _page("OmegaConf docs", "https://omegaconf.readthedocs.io/en/latest/"),
    "pytorch": _page("PyTorch docs", "https://pytorch.org/docs/stable/"),
    "sglang": _page("SGLang docs", "https://docs.sglang.ai/"),
    "linux": _page("Linux kernel docs", "https://docs.kernel.org/"),
    "ascend": _page("Ascend CANN docs", "https://www.hiascend.com/"),  # path: the page's own
}

_PATH = r"[A-Za-z_][\w-]*(?:[/.][\w-]+)*(?:#[\w.-]+)?"
_BEFORE = r"(?<![\w/.:#-])"
_SITE_ID = re.compile(rf"{_BEFORE}(?P<site>{'|'.join(SITES)}):(?P<path>{_PATH})")
_ISSUE_ID = re.compile(rf"{_BEFORE}verl#(?P<n>\d+)\b")
_NAMED_ID = re.compile(rf"{_BEFORE}(?P<kind>seed|paper):(?P<key>[a-z][\w-]*)(?P<section>,? §)?")

#: What a reader cannot open: logscope's own notes, and ids `cite` left as they were.
_INTERNAL = re.compile(
    r"tuning_knowledge|verl_formats|verl_metrics|\b[Ss]eed 00\d|\bseed:|\bpaper:|"
    r"\bverl:(?!\s)|\bverl#(?!\d)"  # "verl: `message`" quotes verl; "verl:path" is an id
)


def cite(text: str, short: bool = False) -> str:
    """`text` with every short citation in it replaced by its readable source.

    `short` (prose: messages, rationales) names an article as "the PPO article"; its title is in
    the advice's source and the references beside it.
    """
    if not text:
        return text
    text = _NAMED_ID.sub(lambda m: _named(m, short), text)
    text = _SITE_ID.sub(lambda m: SITES[m["site"]](m["path"]), text)
    return _ISSUE_ID.sub(lambda m: f"verl #{m['n']}: {VERL_REPO}/issues/{m['n']}", text)


def _named(m: re.Match[str], short: bool) -> str:
    table: dict[str, Article] | dict[str, Paper] = ARTICLES if m["kind"] == "seed" else PAPERS
    source = table.get(m["key"])
    if source is None:
        return m[0]
    if short and isinstance(source, Article):
        return f"the {source.name} article" + (" §" if m["section"] else "")
    return source.label() + (", §" if m["section"] else "")


def cite_all(texts: Iterable[str]) -> list[str]:
    """`cite` of each text (a finding's references)."""
    return [cite(t) for t in texts]


def unresolved(text: str) -> list[str]:
    """Citations in `text` that `cite` leaves unopenable (unknown ids, logscope's own notes)."""
    return [m[0] for m in _INTERNAL.finditer(cite(text))]
