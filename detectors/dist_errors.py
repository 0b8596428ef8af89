"""Collective-communication and rendezvous failures: NCCL (GPUs), HCCL (Ascend NPUs) and
torch.distributed's c10d store."""

from __future__ import annotations

import re
from typing import Any

from logscope.advice import SEED_GRPO, advise
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
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
    DIST_KEYS,
    DIST_RE,
    DIST_STORE_RE,
    HCCL_RE,
    HOST_OOM_KEYS,
    HOST_OOM_RE,
    SignatureDetector,
    phase_near,
)


class NcclError(SignatureDetector, code="LS014", name="nccl-error"):
    """A collective (NCCL on GPUs, HCCL on Ascend NPUs) or torch.distributed's rendezvous store
    failed or timed out.

    What it detects:
        `NCCL operation failed`, `NCCL error`, NCCL result codes (`ncclInternalError`,
        `ncclUnhandledCudaError`, `ncclSystemError`, …), `NCCL communicator was aborted`, the
        process-group watchdog's `Watchdog caught collective operation timeout:
        WorkNCCL(... OpType=ALLGATHER ... Timeout(ms)=600000)`, and torch.distributed's
        `DistBackendError` (the backend of a GPU job is NCCL), also when only Ray's
        `RayTaskError(DistBackendError)` header names it. The kind of failure is read from the
        message: shared memory (`/dev/shm`), network (`ncclSystemError` / `unhandled system
        error`, `ncclRemoteError`, socket and InfiniBand errors, `operation=Connect`), CUDA
        (`ncclUnhandledCudaError`), usage (`ncclInvalidUsage`, `Duplicate GPU`), unavailable
        (`NCCL is not available`, `Distributed package doesn't have NCCL built in`: no NCCL for
        these devices), unknown (only the error's class is in the text). Evidence: error or
        timeout, that kind, the phase, the collective and its timeout when printed, and whether
        a CUDA OOM was logged too.
        On Ascend NPUs, HCCL's failures (`HCCL function error: hcclCommInitRootInfoConfig(…),
        error code is 4`, `call hccl api failed`, `HCCL_E_TIMEOUT`): evidence names the call and
        the code's meaning (`HcclResult`). The c10d store (`DistStoreError`,
        `DistNetworkError`, `The client socket has timed out after`, `The server socket has
        failed to listen`, `c10d::TCPStore::…` frames of a C++ stack): evidence says whether
        its port was taken, a rank timed out waiting, or the store's host went away. Evidence
        `backend`: NCCL, HCCL or c10d-store.

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
        see each rank's GPU (two ranks on one GPU). NCCL unavailable: a torch build with NCCL
        on NVIDIA GPUs; on Ascend NPUs code that creates an NCCL group does not support them
        (HCCL is their backend). For a timeout:
        find the rank that stopped first (its own log, often a CUDA OOM reported separately;
        `NCCL_DEBUG=INFO`); when the first collective (`SeqNum=1`) timed out the ranks never
        connected (`NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE=1` / `NCCL_P2P_DISABLE=1` to narrow it
        down); when the timeout is under an hour and a rank may only be slow,
        `actor_rollout_ref.nccl_timeout` = 3× the current value (at least 1800 s); and, unless
        the ranks never connected, the memory advice above for the rank that stopped.
        HCCL: its device log (`ASCEND_GLOBAL_LOG_LEVEL=1`, the plog) for an internal or
        unnamed error; at communicator set-up or on a timeout, `HCCL_CONNECT_TIMEOUT` (120 s by
        default, 120–7200) for ranks that start at different times; for a socket or RoCE error,
        `HCCL_SOCKET_IFNAME` (the interface the nodes share). The c10d store: a free
        `MASTER_PORT` when its port was taken; otherwise the rank that exited first (its own
        error, often an OOM) and `TORCH_DISTRIBUTED_DEBUG=DETAIL`.

    Known false positives:
        A job killed from outside (preemption, Ctrl-C on one node) makes the surviving ranks
        report NCCL errors; the NCCL error is then a consequence.

    References:
        seed:grpo-pitfalls §4.1 (FSDP buffers starved → NCCL operation failed);
        pytorch:distributed#debugging-torch-distributed-applications (NCCL_DEBUG);
        ascend:document/detail/zh/canncommercial/800/apiref/hcclapiref/hcclcpp_07_0038
        (HcclResult); ascend:document/detail/en/canncommercial/800/apiref/envvar/envref_07_0077
        (HCCL_CONNECT_TIMEOUT).
    """

    title = "Collective communication (NCCL, HCCL) or rendezvous error"
    groups = ("distributed", "crash")
    pattern = DIST_RE
    keywords = DIST_KEYS

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        read = {"HCCL": _hccl, "c10d-store": _store}.get(dist_backend(hits), _nccl)
        message, evidence, advice, references = read(run, hits)
        return self.signature_finding(
            hits, message, evidence=evidence, advice=advice, references=cite_all(references)
        )


#: what a backend's failure reads as: message, evidence, advice, references
Reading = tuple[str, dict[str, Any], list[Advice], list[str]]


def _nccl(run: Run, hits: list[Hit]) -> Reading:
    timeout = any("timeout" in h.text.lower() for h in hits)
    evidence: dict[str, Any] = {"kind": "timeout" if timeout else "error", "backend": "NCCL"}
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
    during = _during(run, hits, evidence)
    what = (
        "NCCL collective timed out"
        if timeout
        else "NCCL is not available"
        if failure == "unavailable"
        else "NCCL operation failed"
    )
    message = f"{what}{during} at {where(hits[0])}; printed {plural(occurrences(hits), 'time')}."
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
        message += f" A CUDA OOM is logged too (line {oom[0].line_no}): probably the root cause."
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
    return message, evidence, advice, [f"{SEED_GRPO} §4.1", DIST_DEBUG_DOC]


def _hccl(run: Run, hits: list[Hit]) -> Reading:
    evidence: dict[str, Any] = {"backend": "HCCL"}
    blob = "\n".join(h.text for h in hits)
    call = HCCL_CALL_RE.search(blob)
    if call:
        evidence["call"] = call["call"]
        evidence["error_code"] = code = int(call["code"])
        evidence["code_name"] = HCCL_RESULTS.get(code, ("unknown", ""))[0]
    named = re.search(r"\bHCCL_E_[A-Z_]+", blob)
    if named and "code_name" not in evidence:
        evidence["code_name"] = named[0]
    code_name = evidence.get("code_name", "")
    during = _during(run, hits, evidence)
    setup = "CommInit" in evidence.get("call", "") or evidence["phase"] == "init"
    timeout = code_name == "HCCL_E_TIMEOUT" or TIMED_OUT_RE.search(blob) is not None
    network = code_name in HCCL_NETWORK_CODES
    evidence["kind"] = "timeout" if timeout else "error"
    evidence["failure"] = "timeout" if timeout else "network" if network else "error"
    what = "HCCL (Ascend NPU collective communication) " + ("timed out" if timeout else "failed")
    message = f"{what}{during} at {where(hits[0])}"
    if call:
        meaning = HCCL_RESULTS.get(evidence["error_code"], ("", "an unlisted code"))[1]
        message += f": {call['call']} returned {evidence['error_code']} ({code_name}, {meaning})"
    message += f"; printed {plural(occurrences(hits), 'time')}."
    if setup:
        message += " It failed while the ranks set up their communicator."
    device_log = env_advice(
        "ASCEND_GLOBAL_LOG_LEVEL",
        1,
        "HCCL's own reason is in the device log (the plog, under ~/ascend/log), not in the "
        "Python error: INFO (1) logs each rank's set-up. Check too that every rank's NPU is "
        "free and visible (npu-smi info, ASCEND_RT_VISIBLE_DEVICES).",
        HCCL_RESULT_DOC,
    )
    connect = env_advice(
        "HCCL_CONNECT_TIMEOUT",
        600,
        "How long a rank waits for the others to connect (120 s by default, 120-7200): ranks "
        "that start minutes apart (one loads a large model, one node is slow to join) fail "
        "here though nothing else is wrong.",
        HCCL_CONNECT_DOC,
    )
    interface = env_advice(
        "HCCL_SOCKET_IFNAME",
        "the interface the nodes reach each other on (see `ip addr`)",
        "A socket or RoCE link between the NPUs' hosts failed: name the interface the nodes "
        "share (HCCL_IF_IP for one address) and check the firewall.",
        HCCL_NETWORK_DOC,
    )
    advice = [interface] if network else []
    advice += [connect, device_log] if timeout else [device_log, *([connect] if setup else [])]
    return message, evidence, advice, [HCCL_RESULT_DOC, HCCL_CONNECT_DOC]


def _store(run: Run, hits: list[Hit]) -> Reading:
    blob = "\n".join(h.text for h in hits) + "\n" + context(run, hits[0].line_no, 0, 6)
    failure = next((kind for kind, rx in STORE_FAILURES if rx.search(blob)), "error")
    evidence: dict[str, Any] = {
        "backend": "c10d-store",
        "kind": "timeout" if failure == "timeout" else "error",
        "failure": failure,
    }
    during = _during(run, hits, evidence)
    message = (
        "torch.distributed's rendezvous store (c10d TCPStore, hosted by rank 0) failed"
        f"{during} at {where(hits[0])}; printed {plural(occurrences(hits), 'time')}. "
        + STORE_NOTES[failure]
    )
    oom = find_lines(run, CUDA_OOM_RE, CUDA_OOM_KEYS) or find_lines(run, HOST_OOM_RE, HOST_OOM_KEYS)
    evidence["oom_logged"] = bool(oom)
    if oom:
        message += (
            f" An out-of-memory error is logged too (line {oom[0].line_no}): probably the rank "
            "that went first."
        )
    if failure == "port-in-use":
        advice = [
            env_advice(
                "MASTER_PORT",
                "a free port (or stop the leftover job: ray stop --force)",
                "Another process on the node already listens on the store's port: a job "
                "still running, or one that did not exit.",
                STORE_DOC,
            )
        ]
    else:
        advice = [
            env_advice(
                "TORCH_DISTRIBUTED_DEBUG",
                "DETAIL",
                "The store fails when a rank is gone or unreachable: the rank that exited "
                "first has its own error (often an OOM) further up or in its worker's log; "
                "TORCH_DISTRIBUTED_DEBUG=DETAIL with TORCH_CPP_LOG_LEVEL=INFO logs each "
                "rank's store traffic. Check that every node reaches MASTER_ADDR:MASTER_PORT.",
                DIST_DEBUG_DOC,
            )
        ]
    return message, evidence, advice, [STORE_DOC, DIST_DEBUG_DOC]


def dist_backend(hits: list[Hit]) -> str:
    """NCCL, HCCL or c10d-store: what failed, by the lines that name it (NCCL's own words first:
    NCCL set-up reaches its peers through the store)."""
    texts = [h.text for h in hits]
    if any(HCCL_RE.search(t) for t in texts):
        return "HCCL"
    if all(DIST_STORE_RE.search(t) for t in texts):
        return "c10d-store"
    return "NCCL"


def _during(run: Run, hits: list[Hit], evidence: dict[str, Any]) -> str:
    """` during <phase>` of the first hit (the crash's phase when it is the final error); sets
    evidence `phase`."""
    story = crash_story(run)
    final = story.crashed and story.in_final_error(hits[0].line_no)
    phase = story.phase if final else phase_near(run, hits[0].line_no, 80, 40)
    evidence["phase"] = phase.id if phase else None
    return f" during {phase.label}" if phase else ""


#: HCCL's `HcclResult` codes: name, meaning
HCCL_RESULTS = {
    1: ("HCCL_E_PARA", "a parameter error"),
    2: ("HCCL_E_PTR", "an empty pointer"),
    3: ("HCCL_E_MEMORY", "a memory error"),
    4: ("HCCL_E_INTERNAL", "an internal error"),
    5: ("HCCL_E_NOT_SUPPORT", "an unsupported feature"),
    6: ("HCCL_E_NOT_FOUND", "a resource not found"),
    7: ("HCCL_E_UNAVAIL", "a resource unavailable"),
    8: ("HCCL_E_SYSCALL", "a system call failed"),
    9: ("HCCL_E_TIMEOUT", "a timeout"),
    10: ("HCCL_E_OPEN_FILE_FAILURE", "a file could not be opened"),
    11: ("HCCL_E_TCP_CONNECT", "a TCP connection failed"),
    12: ("HCCL_E_ROCE_CONNECT", "a RoCE connection failed"),
    13: ("HCCL_E_TCP_TRANSFER", "a TCP transfer failed"),
    14: ("HCCL_E_ROCE_TRANSFER", "a RoCE transfer failed"),
    15: ("HCCL_E_RUNTIME", "a runtime API call failed"),
    16: ("HCCL_E_DRV", "a driver API call failed"),
    17: ("HCCL_E_PROFILING", "a profiling API call failed"),
    18: ("HCCL_E_CCE", "a CCE API call failed"),
    19: ("HCCL_E_NETWORK", "a network API call failed"),
    20: ("HCCL_E_AGAIN", "try again"),
    21: ("HCCL_E_REMOTE", "a remote error (error CQE)"),
    22: ("HCCL_E_SUSPENDING", "the communicator is suspending"),
}
HCCL_NETWORK_CODES = frozenset(
    f"HCCL_E_{name}"
    for name in (
        "TCP_CONNECT",
        "ROCE_CONNECT",
        "TCP_TRANSFER",
        "ROCE_TRANSFER",
        "NETWORK",
        "REMOTE",
    )
)
TIMED_OUT_RE = re.compile(r"(?i)(?<![\w])timed? ?out\b")  # not HCCL_CONNECT_TIMEOUT
HCCL_CALL_RE = re.compile(r"\b(?P<call>hccl\w+)\(.*\), error code is (?P<code>\d+)")
HCCL_RESULT_DOC = "ascend:document/detail/zh/canncommercial/800/apiref/hcclapiref/hcclcpp_07_0038"
HCCL_CONNECT_DOC = "ascend:document/detail/en/canncommercial/800/apiref/envvar/envref_07_0077"
HCCL_NETWORK_DOC = (
    "ascend:doc_center/source/en/CANNCommunityEdition/900/API/hcclug/hcclenvref_07_0017"
)

# What kind of c10d store failure a message names, first match.
STORE_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("port-in-use", re.compile(r"EADDRINUSE|[Aa]ddress already in use")),
    ("timeout", re.compile(r"[Tt]imed out|[Tt]imeout")),
    (
        "host-gone",
        re.compile(
            r"Connection (?:reset by peer|refused|was likely closed)|Broken pipe"
            r"|Failed to recv, got 0 bytes|TCPStore::(?:ping|check|doWait|doGet|incrementValueBy)"
        ),
    ),
)
STORE_NOTES = {
    "port-in-use": "Its port was already in use on the node.",
    "timeout": "A rank waited for the others (or for the store) and gave up: a rank that never "
    "started or died early, or a port the ranks cannot reach.",
    "host-gone": "The store's host went away (its connection closed): the process hosting it "
    "exited first, and its own error is the cause.",
    "error": "Its message does not say why.",
}
STORE_DOC = "pytorch:distributed#torch.distributed.TCPStore"


# What kind of NCCL failure a message (and the lines NCCL prints after it) names, first match.
NCCL_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "unavailable",
        re.compile(r"NCCL is not available|doesn't have NCCL built in"),
    ),
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
    "unavailable": "This torch (or Ray's collective library) has no NCCL for the devices the "
    "job runs on: a CPU-only or non-CUDA build, or a device that is no NVIDIA GPU (an Ascend "
    "NPU's backend is HCCL).",
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
    if failure == "unavailable":
        return [
            env_advice(
                "collective-backend",
                "a torch build with NCCL for NVIDIA GPUs (and cupy for Ray's collective groups); "
                "HCCL on Ascend NPUs",
                "The collective backend must match the devices: on NVIDIA GPUs install a CUDA "
                "build of torch; on NPUs (trainer.device=npu) code that creates an NCCL group "
                "(a recipe's weight-sync group) does not support them: use a recipe or worker "
                "that creates an HCCL group.",
                "pytorch:distributed#backends",
            )
        ]
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
