"""Which ranks are alive when a wait times out: the error then names the rank that stalled.

A collective that times out cannot say which rank is missing (MPI does not tell). So the rank
that gives up asks every other rank directly: it sends each a small probe message (on the
group's communicator, under a tag ember's own messages never use) and waits a short grace
period for the answers. A rank waiting in any ember collective or message answers at once
(`answer_probes` runs in the polling loop of every wait), saying what it waits in; a rank that
died, hangs, or is busy outside ember's waits does not answer, and the error names it. When
every rank answers, they are waiting in different calls (a program whose ranks diverged), and
the error lists what each waits in.
"""

from __future__ import annotations

import time

import numpy as np

from ._mpi import mpi

PROBE_TAG = 32001  # within the MPI standard's smallest allowed tag bound (32767)
REPLY_TAG = 32002
_REPLY_BYTES = 64  # what the rank waits in, UTF-8, zero-padded
_replies: list = []  # answers in flight (their buffers must live until sent)


def _encode(what: str) -> np.ndarray:
    data = what.encode()[:_REPLY_BYTES]
    reply = np.zeros(_REPLY_BYTES, dtype=np.uint8)
    reply[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return reply


def _decode(reply: np.ndarray) -> str:
    return bytes(reply).rstrip(b"\0").decode(errors="replace") or "?"


def answer_probes(comm, what: str) -> None:
    """Answer every probe waiting for this rank with what it waits in."""
    MPI = mpi()
    status = MPI.Status()
    while comm.Iprobe(source=MPI.ANY_SOURCE, tag=PROBE_TAG, status=status):
        asker = status.Get_source()
        note = np.empty(1, dtype=np.int64)
        comm.Recv(note, source=asker, tag=PROBE_TAG)
        reply = _encode(what)
        _replies.append((comm.Isend(reply, dest=asker, tag=REPLY_TAG), reply))
    if _replies:
        _replies[:] = [(r, b) for r, b in _replies if not r.Test()]


def diagnose(comm, what: str, grace_s: float) -> str:
    """Ask every other rank whether it is alive (see the module docstring); a sentence for
    the timeout's error."""
    me, size = comm.Get_rank(), comm.Get_size()
    others = [r for r in range(size) if r != me]
    if not others:
        return ""
    probe = np.array([me], dtype=np.int64)
    sends = [comm.Isend(probe, dest=r, tag=PROBE_TAG) for r in others]
    answers = {r: np.zeros(_REPLY_BYTES, dtype=np.uint8) for r in others}
    receives = {r: comm.Irecv(answers[r], source=r, tag=REPLY_TAG) for r in others}
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        answer_probes(comm, what)
        if all(req.Test() for req in receives.values()):
            break
        time.sleep(1e-3)
    silent = [r for r, req in receives.items() if not req.Test()]
    for r in silent:  # nobody will answer these any more
        receives[r].Cancel()
    for req in sends:
        if not req.Test():
            req.Cancel()
    waiting = {r: _decode(answers[r]) for r in others if r not in silent}
    if silent:
        which = "rank" if len(silent) == 1 else "ranks"
        listed = ", ".join(map(str, silent))
        text = (
            f"{which} {listed} did not respond within {grace_s:g} s (died, hung, or busy "
            "outside ember's collectives)"
        )
        if waiting:
            text += "; " + ", ".join(f"rank {r} waits in {w}" for r, w in waiting.items())
        return text
    return "every rank responded, waiting in different calls: " + ", ".join(
        [f"rank {me} in {what}"] + [f"rank {r} in {w}" for r, w in waiting.items()]
    )
