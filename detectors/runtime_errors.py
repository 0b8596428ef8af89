"""Runtime failure signatures: Ray worker registration, vLLM model inspection, device mix-ups."""

from __future__ import annotations

import re
from typing import Any

from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.model import Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, RO

from ._common import (
    Hit,
    env_advice,
    where,
)
from ._signatures import (
    SignatureDetector,
)


class RayWorkerRegistrationFailed(
    SignatureDetector, code="LS012", name="ray-worker-registration-failed"
):
    """Ray workers could not register with the raylet, so the cluster never came up.

    What it detects:
        `Failed to register worker ... to Raylet` and `Unable to register worker with raylet`,
        in all their endings: `End of file` (the raylet closed the connection), `No such file
        or directory` (the raylet's socket is gone), or none. Usually printed before the first
        step. Evidence: which ending.

    Why it matters:
        Training never starts. This is a Ray session problem, not a verl setting. The seed
        article traces `End of file` to a Ray version conflict (verl 0.2 wants ray ≥ 2.33, and
        an old protobuf in some CUDA images breaks it); `No such file or directory` means the
        worker could not find the raylet's Unix socket under the session's temp dir (the raylet
        died, or another `ray stop` / cleanup removed `/tmp/ray`, or the container's temp dir
        is not the one Ray started in); asking Ray for more CPUs than the node has gives the
        same symptom.

    Example:
        [2025-03-01 12:00:01,234 E 4321 4321] core_worker.cc:499: Failed to register worker
        01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError:
        [RayletClient] Unable to register worker with raylet. End of file

    Advice:
        `End of file`: reinstall Ray with its dependencies (`pip install --force-reinstall
        "ray[default]>=2.33.0"`), delete `/tmp/ray`, and retry. `No such file or directory`:
        `ray stop --force`, remove the stale sessions under `/tmp/ray`, give Ray a short temp
        dir of its own (`RAY_TMPDIR`, a Unix socket path must stay under ~107 characters), and
        read `raylet.out` for the raylet's own failure. Both: set `ray_init.num_cpus` to the
        CPUs the node (or container) really has.

    Known false positives:
        A worker that fails to register during a normal shutdown (after the last step) prints
        the same line; it is then reported at info.

    References:
        seed:ppo-tuning §7.1; ray:ray-observability/user-guides/configure-logging (session
        directory, raylet.out).
    """

    title = "Ray worker failed to register with the raylet"
    groups = ("ray", "crash", "environment")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        eof = any("End of file" in h.text for h in hits)
        no_socket = any("No such file or directory" in h.text for h in hits)
        message = f"Ray could not register a worker with the raylet at {where(hits[0])}"
        if no_socket:
            message += (
                " (No such file or directory: the raylet's socket is gone — a Ray session or "
                "temp-dir problem, not a verl setting)."
            )
        elif eof:
            message += " (End of file: usually a Ray/protobuf version conflict)."
        else:
            message += "."
        advice = []
        if no_socket:
            advice.append(
                env_advice(
                    "RAY_TMPDIR",
                    "a short local directory of this job's own, e.g. /tmp/ray_$USER",
                    "The worker did not find the raylet's Unix socket in the session dir: the "
                    "raylet died (see raylet.out) or the dir was removed or is not shared with "
                    "this process. Run `ray stop --force`, remove stale /tmp/ray sessions, "
                    "and start Ray in a temp dir of its own.",
                    "ray:ray-observability/user-guides/configure-logging",
                )
            )
        if eof or not no_socket:
            advice.append(
                env_advice(
                    "ray",
                    'pip install --force-reinstall "ray[default]>=2.33.0"; rm -rf /tmp/ray',
                    "Conflicting Ray/protobuf versions stop workers from registering; "
                    "reinstall Ray with its extras and clear its temp dir.",
                    f"{SEED_PPO} §7.1",
                )
            )
        advice.append(
            advise(
                run,
                "ray_init.num_cpus",
                "Requesting more CPUs than the node (or container) has also stops workers "
                "from starting.",
                f"{SEED_PPO} §7.1",
                rule="the number of CPUs the node really has",
            )
        )
        return self.signature_finding(
            hits,
            message,
            evidence={"end_of_file": eof, "no_such_file": no_socket},
            advice=advice,
            references=cite_all([f"{SEED_PPO} §7.1"]),
        )


class VllmModelInspectionFailed(
    SignatureDetector, code="LS013", name="vllm-model-inspection-failed"
):
    """vLLM could not inspect the model architecture (vLLM/transformers version mismatch).

    What it detects:
        `Model architectures ['Qwen2ForCausalLM'] failed to be inspected`, raised by vLLM when
        the rollout engine starts. Evidence names the architectures.

    Why it matters:
        The rollout engine never starts, so training cannot begin. The model is fine: the
        installed vLLM does not support it together with the installed transformers.

    Example:
        (WorkerDict pid=5521) ValueError: Model architectures ['Qwen2ForCausalLM'] failed to be
        inspected. Please check the logs for more details.

    Advice:
        Install the vLLM version your verl release pins, with a matching transformers. The seed
        article (verl 0.2 era, Qwen2) pins `vllm==0.6.3.post1` with `transformers>=4.41.0`:
        Qwen2 needs vLLM ≥ 0.6.0 and 0.6.4 had a bug.

    Known false positives:
        A real problem in a custom model's code makes vLLM print the same message; the lines
        above it in the log then show the model's own exception.

    References:
        seed:ppo-tuning §7.2.
    """

    title = "vLLM failed to inspect the model architecture"
    groups = ("vllm", "crash", "environment")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        archs = next((h.match.group(1) for h in hits if h.match.group(1)), None)
        what = f"Model architectures {archs}" if archs else "The model architecture"
        message = f"{what} failed to be inspected by vLLM at {where(hits[0])}: vLLM and transformers versions do not match the model."
        advice = [
            env_advice(
                "vllm",
                'pip install "vllm==0.6.3.post1" "transformers>=4.41.0"',
                "The PPO article's stable pin for Qwen2 models with verl 0.2; with a newer "
                "verl, install the vLLM version that release pins instead.",
                f"{SEED_PPO} §7.2",
            )
        ]
        return self.signature_finding(
            hits,
            message,
            evidence={"architectures": archs},
            advice=advice,
            references=cite_all([f"{SEED_PPO} §7.2"]),
        )


class TensorsOnDifferentDevices(
    SignatureDetector, code="LS021", name="tensors-on-different-devices"
):
    """A tensor op mixed devices (`Expected all tensors to be on the same device`).

    What it detects:
        PyTorch's `RuntimeError: Expected all tensors to be on the same device, but found at
        least two devices, cuda:0 and cpu!` anywhere in the log. Evidence names the devices.

    Why it matters:
        The run stops at the op. The GRPO article ties it to an actor micro batch that is not a
        multiple of the rollout tensor-parallel size; other causes are CPU offload of
        parameters meeting GPU inputs, or custom reward/model code that forgets `.to(device)`.

    Example:
        (WorkerDict pid=3141) RuntimeError: Expected all tensors to be on the same device, but
        found at least two devices, cuda:0 and cpu!

    Advice:
        Make `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu` a multiple of
        `actor_rollout_ref.rollout.tensor_model_parallel_size` (the GRPO article's rule; verl does not
        enforce it). If it already is, look at offload settings and custom code in the
        traceback.

    Known false positives:
        The message comes from any device mix-up, many unrelated to batch sizes; the advice is
        the GRPO article's, for the case it describes.

    References:
        seed:grpo-pitfalls §1.2.
    """

    title = "Tensors on different devices"
    groups = ("crash", "config")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        m = re.search(r"devices?, (\S+) and (\S+?)!?$", hits[0].text)
        devices = [m.group(1), m.group(2)] if m else []
        micro = current_value(run, f"{ACT}.ppo_micro_batch_size_per_gpu")
        tp = current_value(run, f"{RO}.tensor_model_parallel_size")
        suggested = None
        evidence: dict[str, Any] = {"devices": devices}
        if isinstance(micro, int) and isinstance(tp, int) and micro > 0 and tp > 0:
            evidence.update(ppo_micro_batch_size_per_gpu=micro, tensor_model_parallel_size=tp)
            if micro % tp:
                suggested = max(tp, micro // tp * tp)
        message = f"Tensors on different devices at {where(hits[0])}" + (
            f" ({' and '.join(devices)})." if devices else "."
        )
        if suggested is not None:
            message += f" The micro batch {micro} is not a multiple of the rollout TP size {tp}."
        advice = [
            advise(
                run,
                f"{ACT}.ppo_micro_batch_size_per_gpu",
                "The seed article ties this error to a micro batch that is not a multiple of the "
                "rollout tensor-parallel size.",
                f"{SEED_GRPO} §1.2",
                suggest=suggested,
                rule="a multiple of actor_rollout_ref.rollout.tensor_model_parallel_size",
            )
        ]
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §1.2"]),
        )
