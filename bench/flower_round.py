"""One Flower round in its simulation engine, for `bench/vs_flower.py` (Flower side only).

Runs under an interpreter that has ``flwr[simulation]`` (it imports nothing from privrec:
Flower pins protobuf < 7, privrec's generated stubs need protobuf >= 7, so the two live in
separate environments; see docs/decisions/libraries.md). N virtual SuperNodes each hold one user's
1,682-float vector (row u of the population file written by vs_flower.py); the ServerApp waits
until all N nodes are known, sends each one TRAIN message, and receives one reply carrying the
vector (an ArrayRecord), then averages them as FedAvg would. Times are written as JSON:

* ``round``: `Grid.send_and_receive` of the N messages (the collect);
* ``nodes``: from the ServerApp's start until all N nodes are visible;
* ``total``: from this script's start (before importing flwr) until `run_simulation` returns.

Usage: python bench/flower_round.py POPULATION.npy OUT.json [--cpus-per-client C]
"""

from __future__ import annotations

import argparse
import json
import time

T0 = time.perf_counter()

import numpy as np  # noqa: E402
from flwr.app import ArrayRecord, Context, Message, MessageType, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("population", help=".npy of shape (N, 1682)")
    ap.add_argument("out", help="where the JSON timings go")
    ap.add_argument("--cpus-per-client", type=float, default=2.0, help="Flower's default: 2")
    args = ap.parse_args()
    path = str(args.population)
    n = int(np.load(path, mmap_mode="r").shape[0])
    times: dict[str, float] = {}

    client = ClientApp()

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        # partition-id is 0..N-1 in the simulation engine: the node's user
        # The app only captures the file's path: Flower ships the ClientApp to its Ray actors,
        # and a captured array would be pickled with it (13 MB per message at N = 1,000).
        u = int(context.node_config["partition-id"])
        vec = np.array(np.load(path, mmap_mode="r")[u], dtype=np.float64)
        return Message(RecordDict({"arrays": ArrayRecord([vec])}), reply_to=msg)

    server = ServerApp()

    @server.main()
    def run(grid: Grid, context: Context) -> None:
        t = time.perf_counter()
        nodes = list(grid.get_node_ids())
        while len(nodes) < n:
            time.sleep(0.05)
            nodes = list(grid.get_node_ids())
        times["nodes"] = time.perf_counter() - t
        t = time.perf_counter()
        msgs = [
            Message(RecordDict(), dst_node_id=node, message_type=MessageType.TRAIN)
            for node in nodes
        ]
        replies = list(grid.send_and_receive(msgs))
        times["round"] = time.perf_counter() - t
        vectors = [r.content["arrays"].to_numpy_ndarrays()[0] for r in replies if r.has_content()]
        if len(vectors) != n:
            raise RuntimeError(f"{n - len(vectors)} of {n} Flower clients sent no vector")
        mean = np.mean(vectors, axis=0)
        times["mean_checksum"] = float(mean.sum())
        times["replies"] = float(len(vectors))

    run_simulation(
        server_app=server,
        client_app=client,
        num_supernodes=n,
        backend_config={"client_resources": {"num_cpus": args.cpus_per_client}},
    )
    times["total"] = time.perf_counter() - T0
    with open(args.out, "w") as f:
        json.dump(times, f)


if __name__ == "__main__":
    main()
