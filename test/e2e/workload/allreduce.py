"""A training step's collective, with nothing but the standard library: an all-reduce over TCP.

The e2e suite on kind runs this in every node of a TrainJob (image ``WORKLOAD_IMAGE``, built by
``hack/build-images.sh workload``), so that the job completes only when the nodes really found each other
through what the controller set up, as torchrun would:

- ``PET_NNODES`` nodes, this one ``PET_NODE_RANK`` (``JOB_COMPLETION_INDEX`` as a fallback is not used: a
  wrong rank must fail);
- rank 0 listens on ``PET_MASTER_PORT``; every other rank connects to ``PET_MASTER_ADDR`` (the DNS name of
  node 0's Pod under the JobSet's headless Service), retrying until ``ALLREDUCE_TIMEOUT`` seconds; rank 0
  waits ``MASTER_GRACE`` seconds longer, so that a rank that cannot reach it fails first and its own reason
  reaches its log (once a Pod fails, its failed Job deletes the others, and a killed rank says nothing);
- each rank contributes the vector ``[rank + 1, (rank + 1) ** 2]``; rank 0 adds them up, checks that every
  rank from 1 to N - 1 came exactly once, and sends the sum back; every rank checks the sum against the one
  it computes on its own, prints it, and exits 0.

Any missing or malformed variable, a name that does not resolve, a duplicate or missing rank, or a wrong
sum exits non-zero with one line on stderr, so the Pod, the JobSet and the TrainJob fail.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

VARIABLES = ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")

MASTER_GRACE = 60.0
"""How much longer than the other ranks rank 0 waits for them. More than a joiner can overrun its deadline
by: one connection attempt (5 s) after name lookups that may each wait out the resolver's timeouts."""


class Failure(Exception):
    """The all-reduce cannot complete; the message says why."""


def contribution(rank: int) -> list[int]:
    return [rank + 1, (rank + 1) ** 2]


def expected_sum(nnodes: int) -> list[int]:
    total = [0, 0]
    for rank in range(nnodes):
        total = [a + b for a, b in zip(total, contribution(rank), strict=True)]
    return total


def read_environment() -> tuple[int, int, str, int]:
    missing = [name for name in VARIABLES if not os.environ.get(name)]
    if missing:
        raise Failure(f"missing environment variables: {', '.join(missing)}")
    try:
        nnodes = int(os.environ["PET_NNODES"])
        rank = int(os.environ["PET_NODE_RANK"])
        port = int(os.environ["PET_MASTER_PORT"])
    except ValueError as exc:
        raise Failure(f"a PET_* variable is not an integer: {exc}") from exc
    if nnodes < 1 or not 0 <= rank < nnodes:
        raise Failure(f"PET_NODE_RANK={rank} is not a rank of PET_NNODES={nnodes}")
    return nnodes, rank, os.environ["PET_MASTER_ADDR"], port


def send_line(conn: socket.socket, message: dict[str, object]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def receive_line(conn: socket.socket, deadline: float) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = conn.recv(4096)
        if not chunk:
            raise Failure("the peer closed the connection mid-message")
        data += chunk
        if len(data) > 65536:
            raise Failure("a peer sent more than 64 KiB")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise Failure(f"a peer sent {message!r}")
    return message


def serve(nnodes: int, port: int, deadline: float) -> list[int]:
    """Rank 0: gather every other rank's vector, check the ranks, answer each with the sum."""
    address = socket.gethostbyname(socket.gethostname())
    with socket.create_server((address, port)) as server:
        peers: dict[int, socket.socket] = {}
        total = contribution(0)
        while len(peers) < nnodes - 1:
            server.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                conn, _ = server.accept()
            except TimeoutError as exc:
                raise Failure(f"only ranks {sorted(peers)} connected before the deadline") from exc
            message = receive_line(conn, deadline)
            rank = message.get("rank")
            if not isinstance(rank, int) or not 0 < rank < nnodes or rank in peers:
                raise Failure(f"rank {rank!r} is out of range or came twice (seen: {sorted(peers)})")
            vector = message.get("vector")
            if vector != contribution(rank):
                raise Failure(f"rank {rank} sent {vector!r}")
            peers[rank] = conn
            total = [a + b for a, b in zip(total, contribution(rank), strict=True)]
        for conn in peers.values():
            with conn:
                send_line(conn, {"sum": total})
    return total


def join(rank: int, master: str, port: int, deadline: float) -> list[int]:
    """Any other rank: connect to rank 0 (its name may not resolve yet), send, wait for the sum."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            conn = socket.create_connection((master, port), timeout=5)
        except OSError as exc:  # not resolvable yet, or not listening yet
            last_error = exc
            time.sleep(1)
            continue
        with conn:
            send_line(conn, {"rank": rank, "vector": contribution(rank)})
            answer = receive_line(conn, deadline).get("sum")
        if not isinstance(answer, list):
            raise Failure(f"rank 0 answered {answer!r}")
        return [int(x) for x in answer]
    raise Failure(f"could not reach {master}:{port} before the deadline: {last_error}")


def main() -> int:
    try:
        nnodes, rank, master, port = read_environment()
        deadline = time.monotonic() + float(os.environ.get("ALLREDUCE_TIMEOUT", "180"))
        if rank == 0:
            total = serve(nnodes, port, deadline + MASTER_GRACE)
        else:
            total = join(rank, master, port, deadline)
        if total != expected_sum(nnodes):
            raise Failure(f"the sum is {total}, expected {expected_sum(nnodes)}")
    except (Failure, OSError, ValueError) as exc:
        print(f"allreduce: rank {os.environ.get('PET_NODE_RANK', '?')}: {exc}", file=sys.stderr)
        return 1
    print(f"allreduce: rank {rank} of {nnodes} via {master}:{port}: sum {total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
