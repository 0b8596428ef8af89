"""Runtime failure signatures: Ray worker registration, vLLM model inspection, NCCL, device mix-ups."""

from __future__ import annotations

import re
from typing import Any

from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, RO
from logscope.words import plural

from ._common import (
    Hit,
    context,
    env_advice,
    find_lines,
    gpu_memory_advice,
    occurrences,
    where,
)
from ._crash_story import crash_story
from ._signatures import (
    CUDA_OOM_KEYS,
    CUDA_OOM_RE,
    SignatureDetector,
    phase_near,
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


class NcclError(SignatureDetector, code="LS014", name="nccl-error"):
    """An NCCL collective failed or timed out.

    What it detects:
        `NCCL operation failed`, `NCCL error`, NCCL result codes (`ncclInternalError`,
        `ncclUnhandledCudaError`, `ncclSystemError`, …), `NCCL communicator was aborted`, the
        process-group watchdog's `Watchdog caught collective operation timeout:
        WorkNCCL(... OpType=ALLGATHER ... Timeout(ms)=600000)`, and torch.distributed's
        `DistBackendError` (the backend of a GPU job is NCCL), also when only Ray's
        `RayTaskError(DistBackendError)` header names it. The kind of failure is read from the
        message: shared memory (`/dev/shm`), network (`ncclSystemError` / `unhandled system
        error`, `ncclRemoteError`, socket and InfiniBand errors, `operation=Connect`), CUDA
        (`ncclUnhandledCudaError`), usage (`ncclInvalidUsage`, `Duplicate GPU`), unknown (only
        the error's class is in the text). Evidence: error or timeout, that kind, the phase,
        the collective and its timeout when printed, and whether a CUDA OOM was logged too.

    Why it matters:
        A failed collective stops every rank. With vLLM colocated, a too-large
        `gpu_memory_utilization` leaves FSDP's communication buffers without memory; a watchdog
        timeout means one rank stopped answering (crashed, hung, or much slower than the rest).

    Example:
        (WorkerDict pid=812) torch.distributed.DistBackendError: NCCL error in:
        ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error, NCCL version 2.20.5
        ncclUnhandledCudaError: Call to CUDA function failed.

    Advice:
        For a CUDA or unnamed error: lower `actor_rollout_ref.rollout.gpu_memory_utilization`
        into the advised range (or 0.1 below the current value) so FSDP has room for its
        buffers, and `NCCL_DEBUG=INFO` (first, when the message is cut). For a network error:
        `NCCL_SOCKET_IFNAME` (the interface the nodes share), `NCCL_IB_DISABLE=1` to tell
        whether InfiniBand is at fault (then fix `NCCL_IB_HCA` / the IB setup), the firewall,
        `NCCL_DEBUG=INFO`; no memory advice unless a CUDA OOM is logged. For shared memory: a
        larger `/dev/shm` (`--shm-size`, `--ipc=host`). For a usage error: `NCCL_DEBUG=INFO` to
        see each rank's GPU (two ranks on one GPU). For a timeout:
        find the rank that stopped first (its own log, often a CUDA OOM reported separately;
        `NCCL_DEBUG=INFO`); when the first collective (`SeqNum=1`) timed out the ranks never
        connected (`NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE=1` / `NCCL_P2P_DISABLE=1` to narrow it
        down); when the timeout is under an hour and a rank may only be slow,
        `actor_rollout_ref.nccl_timeout` = 3× the current value (at least 1800 s); and, unless
        the ranks never connected, the memory advice above for the rank that stopped.

    Known false positives:
        A job killed from outside (preemption, Ctrl-C on one node) makes the surviving ranks
        report NCCL errors; the NCCL error is then a consequence.

    References:
        seed:grpo-pitfalls §4.1 (FSDP buffers starved → NCCL operation failed);
        pytorch:distributed#debugging-torch-distributed-applications (NCCL_DEBUG).
    """

    title = "NCCL communication error or timeout"
    groups = ("distributed", "crash")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        timeout = any("timeout" in h.text.lower() for h in hits)
        evidence: dict[str, Any] = {"kind": "timeout" if timeout else "error"}
        blob = "\n".join(h.text for h in hits)
        m = re.search(r"OpType=(\w+)", blob)
        if m:
            evidence["collective"] = m.group(1)
        m = re.search(r"Timeout\(ms\)=(\d+)", blob)
        if m:
            evidence["timeout_ms"] = int(m.group(1))
        m = re.search(r"SeqNum=(\d+)", blob)
        if m:
            evidence["seq_num"] = int(m.group(1))
        after = context(run, hits[0].line_no, 0, 6)
        failure = "timeout" if timeout else nccl_failure(hits, after)
        evidence["failure"] = failure
        oom = find_lines(run, CUDA_OOM_RE, CUDA_OOM_KEYS)
        evidence["cuda_oom_logged"] = bool(oom)
        story = crash_story(run)
        final = story.crashed and story.in_final_error(hits[0].line_no)
        phase = story.phase if final else phase_near(run, hits[0].line_no, 80, 40)
        evidence["phase"] = phase.id if phase else None
        what = "NCCL collective timed out" if timeout else "NCCL operation failed"
        during = f" during {phase.label}" if phase else ""
        message = (
            f"{what}{during} at {where(hits[0])}; printed {plural(occurrences(hits), 'time')}."
        )
        m = re.search(r"operation=(\w+)", after)
        if m:
            evidence["operation"] = m.group(1)
        while_connecting = (
            " while connecting to another rank (operation=Connect)"
            if m and m.group(1) == "Connect"
            else ""
        )
        if failure in FAILURE_NOTES:
            message += " " + FAILURE_NOTES[failure].format(connect=while_connecting)
        if oom:
            message += (
                f" A CUDA OOM is logged too (line {oom[0].line_no}): probably the root cause."
            )
        mem = gpu_memory_advice(
            run,
            "NCCL failures with vLLM colocated usually mean FSDP's communication buffers are "
            "starved (for a timeout: on the rank that stopped).",
            always=True,
        )
        memory = [mem] if mem else []
        if timeout:
            connect = evidence.get("seq_num") == 1  # memory does not stop ranks connecting
            advice = _timeout_advice(run, evidence, bool(oom)) + ([] if connect else memory)
            if connect:
                message += " It was the first collective (SeqNum=1): the ranks never connected."
            elif evidence.get("timeout_ms", 0) >= LONG_TIMEOUT_MS:
                hours = evidence["timeout_ms"] / 3_600_000
                message += (
                    f" The timeout was already {hours:g} h: a rank hung or died rather than ran "
                    "slow, so more time will not help."
                )
        else:
            advice = _failure_advice(failure, memory, bool(oom))
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §4.1", DIST_DEBUG_DOC]),
        )


# What kind of NCCL failure a message (and the lines NCCL prints after it) names, first match.
NCCL_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("shm", re.compile(r"/dev/shm|shared memory segment|NCCL_SHM")),
    (
        "network",
        re.compile(
            r"ncclSystemError|unhandled system error|ncclRemoteError|remote process exited"
            r"|network error|operation=Connect|Connection (?:refused|reset|closed|timed out)"
            r"|NET/(?:Socket|IB)|Socket Timeout|\bibv_\w+"
        ),
    ),
    ("cuda", re.compile(r"ncclUnhandledCudaError|unhandled cuda error")),
    (
        "usage",
        re.compile(r"ncclInvalid(?:Usage|Argument)|invalid (?:usage|argument)|Duplicate GPU"),
    ),
)
# A line that names only the error's class: Ray's header, or torch's exception cut before its text.
CLASS_ONLY_RE = re.compile(r"RayTaskError\(DistBackendError\)|^[\w.]*DistBackendError:?\s*$")
FAILURE_NOTES = {
    "shm": "NCCL could not create its shared-memory segment (/dev/shm): a container with too "
    "little shared memory, not a training setting.",
    "network": "A system or socket call inside NCCL failed{connect}: most often the network "
    "between the ranks (interface, InfiniBand, firewall), not GPU memory.",
    "cuda": "A CUDA call inside NCCL failed: usually GPU memory left for NCCL's buffers.",
    "usage": "The ranks disagree (different tensor sizes in one collective, or two ranks on one "
    "GPU): a setup or code problem, not memory.",
    "unknown": "Only torch's DistBackendError is named (the backend of a GPU job is NCCL); the "
    "NCCL message itself is not in the text.",
}


def nccl_failure(hits: list[Hit], after: str) -> str:
    """The kind of an NCCL failure from its lines and the ones after the first (NCCL's `Last
    error:`): shm, network, cuda, usage, unknown (only the error's class is named) or error."""
    text = "\n".join(h.text for h in hits) + "\n" + after
    for kind, pattern in NCCL_FAILURES:
        if pattern.search(text):
            return kind
    if all(CLASS_ONLY_RE.search(h.text) for h in hits):
        return "unknown"
    return "error"


def _failure_advice(failure: str, memory: list[Advice], oom: bool) -> list[Advice]:
    """Advice for an NCCL error (not a timeout) by its kind."""
    debug = env_advice(
        "NCCL_DEBUG",
        "INFO",
        "NCCL then logs each rank's setup (interfaces, transports, GPUs) and the exact call that "
        "failed, which tells a network, memory or setup problem apart.",
        DIST_DEBUG_DOC,
    )
    if failure == "shm":
        return [
            env_advice(
                "shm",
                "a larger /dev/shm (docker run --shm-size=16g, or --ipc=host)",
                "NCCL passes data between the GPUs of one node through /dev/shm; a container's "
                "default (64 MB) is too small. NCCL_SHM_DISABLE=1 avoids it at a speed cost.",
                DIST_DEBUG_DOC,
            ),
            debug,
        ]
    if failure == "network":
        return [*network_advice(), debug, *(memory if oom else [])]
    if failure == "usage":
        return [
            env_advice(
                "NCCL_DEBUG",
                "INFO",
                "The log then shows each rank's GPU: two ranks on one GPU (CUDA_VISIBLE_DEVICES, "
                "trainer.n_gpus_per_node larger than the GPUs each node has) or ranks that call "
                "a collective with different shapes.",
                DIST_DEBUG_DOC,
            )
        ]
    if failure == "unknown":
        return [debug, *memory]
    return [*memory, debug]


def network_advice() -> list[Advice]:
    """The ranks cannot reach each other: the interface NCCL uses, InfiniBand, the firewall."""
    return [
        env_advice(
            "NCCL_SOCKET_IFNAME",
            "the interface the nodes reach each other on (see `ip addr`)",
            "NCCL picked an interface the other nodes cannot reach (a docker bridge, a "
            "loopback or a management network): name the one they share, for every worker "
            "(Ray's runtime env).",
            DIST_DEBUG_DOC,
        ),
        env_advice(
            "NCCL_IB_DISABLE",
            1,
            "To tell whether InfiniBand/RoCE is at fault: with it off NCCL uses plain TCP "
            "sockets (slower). If that works, fix the IB setup (NCCL_IB_HCA, the HCAs' ports, "
            "GID index) instead of keeping it off. Check the firewall between the nodes too.",
            DIST_DEBUG_DOC,
        ),
    ]


#: PyTorch's page on debugging distributed jobs (NCCL_DEBUG, TORCH_DISTRIBUTED_DEBUG)
DIST_DEBUG_DOC = "pytorch:distributed#debugging-torch-distributed-applications"
#: a timeout this long is not a slow rank that more time would let finish
LONG_TIMEOUT_MS = 3_600_000


def _timeout_advice(run: Run, evidence: dict[str, Any], oom: bool) -> list[Advice]:
    """A watchdog timeout: find the rank that stopped; first collective → the network; a short
    timeout on a slow phase → a longer one."""
    first_rank = (
        "One rank stopped answering and the others waited for it: that rank's own log names the "
        "cause (an exception, an OOM, a hang). NCCL_DEBUG=INFO logs every rank's setup and the "
        "collective each one is in; TORCH_NCCL_TRACE_BUFFER_SIZE (a non-zero size) records the "
        "stuck collective."
    )
    if oom:
        first_rank += " A CUDA OOM is in this log: that rank is the likely one."
    advice = [env_advice("NCCL_DEBUG", "INFO", first_rank, DIST_DEBUG_DOC)]
    seq, timeout_ms = evidence.get("seq_num"), evidence.get("timeout_ms")
    if seq == 1:
        advice.append(
            env_advice(
                "NCCL_SOCKET_IFNAME",
                "the interface the nodes reach each other on (see `ip addr`)",
                "The first collective never completed, so the ranks never connected: NCCL chose "
                "an interface the other nodes cannot reach, or InfiniBand / peer-to-peer does not "
                "work here. To narrow it down, rerun with NCCL_IB_DISABLE=1 or NCCL_P2P_DISABLE=1 "
                "and check the firewall between the nodes.",
                DIST_DEBUG_DOC,
            )
        )
    elif timeout_ms is None or timeout_ms < LONG_TIMEOUT_MS:
        advice.append(
            advise(
                run,
                "actor_rollout_ref.nccl_timeout",
                "If the waiting ranks were only slower than the others (a long validation, a "
                "checkpoint save on a shared file system, a first step that compiles), a longer "
                "timeout lets them finish; a rank that hung needs the first advice instead.",
                "verl:workers/fsdp_workers.py",
                suggest=lambda cur: max(3 * int(cur), 1800) if isinstance(cur, int) else None,
                rule="3× the current timeout (seconds), at least 1800",
            )
        )
    return advice


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
