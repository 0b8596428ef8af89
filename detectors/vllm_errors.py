"""The vLLM rollout engine failed (engine core, start-up, an error raised in vLLM's own code)."""

from __future__ import annotations

from typing import Any

from logscope.advice import advise
from logscope.detector import Detector
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, REF, RO

from ._common import (
    Hit,
    LogLine,
    env_advice,
    find_lines,
    gpu_memory_advice,
    log_lines,
    quote,
    where,
)
from ._crash_story import IMPORT_ERRORS, RAY_TASK_RE, CrashStory, crash_story
from ._signatures import (
    BF16_GPU_KEYS,
    BF16_GPU_RE,
    FRAME_RE,
    SIGNATURE_BY_KIND,
    VLLM_ENGINE_KEYS,
    VLLM_ENGINE_RE,
    VLLM_SPECIFIC_KINDS,
    SignatureDetector,
    engine_path,
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
        the installed vLLM is not the one this verl release was written for); a traceback cut
        before its exception whose innermost frame shown is vLLM's (`vllm/entrypoints/llm.py
        … wake_up`, `llm_engine.step`, verl's `third_party/vllm`; torch's frames skipped): the
        failure is inside the engine, its cause not in the text; and vLLM's `Bfloat16 is only
        supported on GPUs with compute capability of at least 8.0` (a V100 or T4), with the
        GPU and its compute capability.
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
        it: verl's async rollout (`rollout.mode=async`) needs the V1 engine. bfloat16 refused:
        `actor_rollout_ref.rollout.dtype=float16` and the actor's
        `actor_rollout_ref.actor.fsdp_config.dtype=float16` (verl ≥ 0.6.1), or an Ampere-or-newer
        GPU. A failure in sleep/wake-up: `rollout.gpu_memory_utilization` lower (waking up
        re-allocates the weights and KV cache). Otherwise install the vLLM version your verl
        release pins, and read the engine core's own traceback (in the log above, or the
        worker's log) for the reason.

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
        bf16 = find_lines(run, BF16_GPU_RE, BF16_GPU_KEYS)
        if bf16:
            finding = self._bf16(run, bf16)
            return [SignatureDetector.at_shutdown(run, bf16, finding)]
        hits = find_lines(run, VLLM_ENGINE_RE, VLLM_ENGINE_KEYS)
        raised = story.crashed and story.kind in RAISED_KINDS and story.raised_in == "vllm"
        if not hits and not raised:
            return []
        if raised and story.cause is not None:
            first = story.cause.line
        elif hits:
            first = hits[0].line
        else:
            assert story.cut_in is not None  # raised without a cause: a cut traceback
            first = story.lines[story.cut_in[1]]  # its innermost frame shown
        finding = self._finding(run, story, hits, first, raised)
        return [SignatureDetector.at_shutdown(run, hits, finding) if hits else finding]

    def _bf16(self, run: Run, hits: list[Hit]) -> Finding:
        """vLLM refused bfloat16: the GPU is older than Ampere (V100, T4)."""
        m = hits[0].match
        gpu, cc = m.group("gpu"), m.group("cc")
        what = f"this GPU ({gpu}, compute capability {cc})" if gpu and cc else "this GPU"
        message = (
            f"vLLM refused bfloat16 on {what} at {where(hits[0])}: bfloat16 needs compute "
            "capability 8.0 (Ampere or newer: A100, L4, H100, RTX 30xx), so the rollout engine "
            "never starts. Run in float16 on this GPU, or move to an Ampere-or-newer GPU."
        )
        why = (
            "vLLM loads the model in the rollout's dtype (bfloat16 by default); float16 is the "
            "half-precision type GPUs before Ampere support (vLLM's own hint: --dtype=half)."
        )
        advice = [
            advise(run, f"{RO}.dtype", why, "verl:trainer/config/ppo_trainer.yaml", "float16"),
            advise(
                run,
                f"{ACT}.fsdp_config.dtype",
                "The actor's FSDP mixed precision is bfloat16 by default too, and the weights it "
                "syncs to the rollout must match: set it (and the reference model's, "
                f"{REF}.fsdp_config.dtype) to float16 as well (verl ≥ 0.6.1; older releases read "
                f"+{ACT}.fsdp_config.mixed_precision.param_dtype=fp16). float16 training needs "
                "loss scaling and is less stable than bfloat16.",
                "verl:trainer/config/ppo_trainer.yaml",
                "float16",
            ),
        ]
        return self.finding(
            message=message,
            step=hits[0].step,
            evidence={
                "line": hits[0].line_no,
                "quote": quote(hits[0].text),
                "gpu": gpu,
                "compute_capability": float(cc) if cc else None,
                "phase": "init",
            },
            advice=advice,
            references=cite_all(
                ["verl:trainer/config/ppo_trainer.yaml", "vllm:docs/usage/troubleshooting"]
            ),
        )

    def _finding(
        self, run: Run, story: CrashStory, hits: list[Hit], first: LogLine, raised: bool
    ) -> Finding:
        final = story.crashed and story.in_final_error(first.line_no)
        phase = story.phase if final else phase_near(run, first.line_no, 80, 40)
        cause = story.cause if final else None
        frame = _vllm_frame(story) if raised else None
        if raised and frame is None and story.cut_in is not None:
            frame = _frame_text(story.lines[story.cut_in[1]].text)
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
            message += (
                f"; its message is not in the log ({story.missing})." if story.missing else "."
            )
        elif raised and story.cut_in is not None and not hits:
            message = (
                f"The traceback ends inside vLLM's code ({frame}){during} "
                f"at {where}: the rollout engine failed, but the excerpt is cut before the "
                f"exception ({story.missing or 'no exception line is in it'})."
            )
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
            advice=_advice(run, cause.message if cause else None, phase.id if phase else None),
            references=cite_all(
                ["verl:workers/rollout/vllm_rollout", "vllm:docs/usage/troubleshooting"]
            ),
        )


def _has(run: Run, kind: str) -> bool:
    sig = SIGNATURE_BY_KIND[kind]
    return bool(find_lines(run, sig.pattern, sig.keywords))


def _frame_text(text: str) -> str:
    """`wake_up in vllm/entrypoints/llm.py` for a traceback frame line."""
    m = FRAME_RE.match(text)
    return f"{m.group('func')} in {engine_path(m.group('path'))}" if m else quote(text, 80)


def _vllm_frame(story: CrashStory) -> str | None:
    """`from_vllm_config (vllm/v1/engine/async_llm.py)`: the frame the cause was raised in (the
    Ray task, when only Ray's header names the cause)."""
    if story.cause is None:
        return None
    if story.cause.from_wrapper and (task := RAY_TASK_RE.search(story.cause.line.text)):
        return f"{task.group(0)}, the vLLM server's Ray task"
    for x in reversed(story.lines[: story.cause.index]):
        m = FRAME_RE.match(x.text)
        if m is not None:
            path = m.group("path")
            return f"{m.group('func')} ({path[path.rfind('/vllm/') + 1 :]})"
    return None


def _advice(run: Run, message: str | None, phase: str | None) -> list[Advice]:
    out = []
    if phase == "weight-sync":
        mem = gpu_memory_advice(
            run,
            "Waking vLLM up re-allocates its weights and KV cache (the cumem allocator of vLLM's "
            "sleep mode); what fails there is most often GPU memory the training side still "
            "holds.",
        )
        out.extend([mem] if mem else [])
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
            "Engine failures (at start-up above all) are most often a vLLM that does not match "
            "verl, torch or transformers; the engine core's own traceback names the reason.",
            "verl:docs/start/install",
        )
    )
    return out
