"""The vLLM rollout engine failed (engine core, start-up, an error raised in vLLM's own code)."""

from __future__ import annotations

from typing import Any

from logscope.detector import Detector
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all

from ._common import Hit, LogLine, env_advice, find_lines, log_lines, quote
from ._crash_story import IMPORT_ERRORS, CrashStory, crash_story
from ._signatures import (
    FRAME_RE,
    SIGNATURE_BY_KIND,
    VLLM_ENGINE_KEYS,
    VLLM_ENGINE_RE,
    VLLM_SPECIFIC_KINDS,
    SignatureDetector,
    phase_near,
)

PIN = "the vLLM version your verl release pins (verl's requirements / setup.py)"


# The crash kinds that vLLM's own frame can raise (a CUDA fault inside the engine's kernels).
RAISED_KINDS = ("vllm-engine", "cuda-error")


class VllmError(Detector, code="LS023", name="vllm-error"):
    """The vLLM rollout engine failed and no more specific vLLM diagnosis explains it.

    What it detects:
        vLLM's engine-core failures — `Process EngineCore_0:` followed by a traceback,
        `EngineCore failed to start`, `Engine core initialization failed`, `EngineDeadError`,
        `EngineCore encountered a fatal error` — and a run that ended with an exception raised
        from vLLM's own code (the innermost frame is under a `vllm/` path, e.g. `ValueError:
        Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False` from `AsyncLLM.from_vllm_config`),
        or an `ImportError` of one of vLLM's modules (`cannot import name 'x' from 'vllm.y'`:
        the installed vLLM is not the one this verl release was written for).
        Silent when vllm-kv-cache-no-memory, vllm-model-inspection-failed or
        max-num-batched-tokens-too-small fires (they are the specific cases). Evidence: the
        engine line, the exception, the vLLM frame it came from, the phase (engine start-up
        in `init_engine` / `init_model`, generation, sleep/wake-up).

    Why it matters:
        Without its rollout engine verl cannot generate, so the run stops (at start-up, the
        first step never comes). Most engine failures at start-up are environment problems —
        a vLLM that does not match verl, torch or the environment flags — not training
        settings.

    Example:
        ray.exceptions.RayTaskError(ValueError): ray::AsyncvLLMServer.init_engine() (pid=588112, …)
          File ".../vllm/v1/engine/async_llm.py", line 143, in from_vllm_config
        ValueError: Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False. This should not happen.

    Advice:
        `VLLM_USE_V1=1` in the environment (and in Ray's runtime env) when vLLM complains about
        it: verl's async rollout (`rollout.mode=async`) needs the V1 engine. Otherwise install
        the vLLM version your verl release pins, and read the engine core's own traceback (in
        the log above, or the worker's log) for the reason.

    Known false positives:
        An exception raised in vLLM's code because of bad input from a custom agent loop or
        reward function is reported here too; the quoted exception tells.

    References:
        verl:workers/rollout/vllm_rollout (vLLM rollout); vllm:docs/usage/troubleshooting
        (engine core errors); vllm:docs/usage/v1_guide (VLLM_USE_V1).
    """

    title = "vLLM rollout engine failed"
    reads = "events"
    default_severity = "error"
    groups = ("vllm", "crash", "environment")

    def detect(self, run: Run) -> list[Finding]:
        if any(_has(run, kind) for kind in VLLM_SPECIFIC_KINDS):
            return []
        story = crash_story(run)
        hits = find_lines(run, VLLM_ENGINE_RE, VLLM_ENGINE_KEYS)
        raised = story.crashed and story.kind in RAISED_KINDS and story.raised_in == "vllm"
        if not hits and not raised:
            return []
        first = story.cause.line if raised and story.cause else hits[0].line
        finding = self._finding(run, story, hits, first, raised)
        return [SignatureDetector.at_shutdown(run, hits, finding) if hits else finding]

    def _finding(
        self, run: Run, story: CrashStory, hits: list[Hit], first: LogLine, raised: bool
    ) -> Finding:
        final = story.crashed and story.in_final_error(first.line_no)
        phase = story.phase if final else phase_near(run, first.line_no, 80, 40)
        cause = story.cause if final else None
        frame = _vllm_frame(story) if raised else None
        where = f"line {first.line_no}" + (
            f" (last step logged before it: {first.step})" if first.step is not None else ""
        )
        during = f" during {phase.label}" if phase else ""
        if raised and cause is not None and cause.name in IMPORT_ERRORS:
            message = (
                f"verl could not import from the installed vLLM ({cause.text()}){during} at "
                f"{where}: that vLLM is not the version this verl release was written for."
            )
        elif raised and cause is not None:
            message = f"vLLM raised {cause.text()}{during} at {where}"
            if frame:
                message += f", in {frame}"
            message += "."
        else:
            message = f"The vLLM engine failed ({quote(first.text, 80)}){during} at {where}"
            if cause is not None:
                message += f": {cause.text()}."
            elif final and story.missing:
                message += f"; its exception is not in the log ({story.missing})."
            else:
                message += "."
        evidence: dict[str, Any] = {
            "line": first.line_no,
            "quote": quote(first.text),
            "count": len(hits) or 1,
            "exception": cause.text() if cause else None,
            "vllm_frame": frame,
            "phase": phase.id if phase else None,
            "async_server": any("AsyncvLLMServer" in x.text for x in log_lines(run)),
        }
        return self.finding(
            message=message,
            step=first.step,
            evidence=evidence,
            advice=_advice(cause.message if cause else None),
            references=cite_all(
                ["verl:workers/rollout/vllm_rollout", "vllm:docs/usage/troubleshooting"]
            ),
        )


def _has(run: Run, kind: str) -> bool:
    sig = SIGNATURE_BY_KIND[kind]
    return bool(find_lines(run, sig.pattern, sig.keywords))


def _vllm_frame(story: CrashStory) -> str | None:
    """`from_vllm_config (vllm/v1/engine/async_llm.py)`: the frame the cause was raised in."""
    if story.cause is None:
        return None
    for x in reversed(story.lines[: story.cause.index]):
        m = FRAME_RE.match(x.text)
        if m is not None:
            path = m.group("path")
            return f"{m.group('func')} ({path[path.rfind('/vllm/') + 1 :]})"
    return None


def _advice(message: str | None) -> list[Advice]:
    out = []
    if message and "VLLM_USE_V1" in message:
        out.append(
            env_advice(
                "VLLM_USE_V1",
                1,
                "vLLM built the V1 async engine while its environment flag said V0: verl's "
                "async rollout needs V1. Export it for the driver and in Ray's runtime env "
                "(ray_init.runtime_env / ray_kwargs) so every worker sees it.",
                "vllm:docs/usage/v1_guide",
            )
        )
    out.append(
        env_advice(
            "vllm",
            PIN,
            "Engine failures at start-up are most often a vLLM that does not match verl, torch "
            "or transformers; the engine core's own traceback names the reason.",
            "verl:docs/start/install",
        )
    )
    return out
