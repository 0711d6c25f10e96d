"""What `privrec sim` sets up so that a run has TLS and node authentication by default.

Before any node starts, the orchestrator writes into ``RUN_DIR/secrets/`` (0700):

* ``keys/``: an Ed25519 key pair for each client shard (``shard-I``) and for the adversary's
  sybil clients (``adversary``), and the allow-list of their public keys the server accepts
  (`privrec.shared.identity.make_keys`), with the orchestrator's control key (``sim``), which
  signs its phase announcements (`shared.control.announcements`) and acts for no user;
* ``tls/``: a CA, the server's and the broker's certificates and a client certificate per node
  (the shards, ``adversary``, ``operator`` for the orchestrator's Admin and model calls, and
  ``sim`` for its MQTT connection) (`privrec.shared.tls.make_certs`).

Every private key is created 0600. `SimOptions(insecure=True)` (`privrec sim --insecure`) turns
both off, with a warning on stderr and in every node's log; `SimOptions(tls_dir=...)` uses an
existing `privrec certs` directory instead (for an external ``mqtts://`` broker that trusts
that CA).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from privrec.shared.identity import ALLOW_LIST_NAME, NodeIdentity, make_keys
from privrec.shared.tls import TlsFiles, make_certs

logger = logging.getLogger(__name__)

ADVERSARY = "adversary"
OPERATOR = "operator"
SIM = "sim"
SYBILS = "sybils"  # the adversary's sybil clients (`adversary.sybils`), a client node of their own


@dataclasses.dataclass(frozen=True)
class RunSecurity:
    """A run's keys and certificates (or none, when `insecure`).

    Attributes:
        insecure: no TLS, no node authentication.
        keys_dir: the nodes' keys and ``allow-list.json``.
        tls_dir: the CA and certificates.
    """

    insecure: bool
    keys_dir: Path | None = None
    tls_dir: Path | None = None

    @property
    def allow_list(self) -> Path | None:
        """The allow-list file, or None without keys."""
        return None if self.keys_dir is None else self.keys_dir / ALLOW_LIST_NAME

    def server_args(self) -> list[str]:
        """`privrec server` options."""
        if self.insecure:
            return ["--insecure"]
        return ["--allow-list", str(self.allow_list), "--tls-dir", str(self.tls_dir)]

    def node_args(self, node: str) -> list[str]:
        """`privrec clients` / `privrec adversary` options for `node`."""
        if self.insecure:
            return ["--insecure"]
        return ["--node-key", str(self.key(node)), "--tls-dir", str(self.tls_dir)]

    def key(self, node: str) -> Path:
        """The key file of `node`."""
        assert self.keys_dir is not None
        return self.keys_dir / f"{node}.key"

    def identity(self, node: str) -> NodeIdentity | None:
        """The identity of `node`, or None when the run is insecure."""
        return None if self.insecure else NodeIdentity.load(self.key(node))


def prepare_security(
    out: Path,
    n_shards: int,
    *,
    insecure: bool,
    tls_dir: Path | None = None,
    sybils: bool = False,
    hosts: tuple[str, ...] = (),
) -> RunSecurity:
    """Write the run's keys and certificates (see the module docstring); `sybils` adds the
    adversary's sybil node (it enrolls and releases like a shard, under its own key); `hosts`
    are addresses the server and broker are reached at besides loopback (`--launcher ray`)."""
    if insecure:
        logger.warning("INSECURE run: no TLS and no node authentication (--insecure)")
        return RunSecurity(insecure=True)
    secrets_dir = out / "secrets"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secrets_dir.chmod(0o700)
    shards = [f"shard-{i}" for i in range(n_shards)]
    keys = secrets_dir / "keys"
    clients = [*shards, ADVERSARY, *([SYBILS] if sybils else [])]
    make_keys(keys, clients, control=[SIM])
    nodes = [*clients, OPERATOR, SIM]
    if tls_dir is None:
        tls_dir = make_certs(secrets_dir / "tls", nodes, hosts=hosts)
    else:
        missing = [n for n in nodes if not (tls_dir / f"{n}.pem").exists()]
        if missing:  # the directory's CA signs the nodes it lacks
            make_certs(tls_dir, missing)
        TlsFiles.of(tls_dir, "server")
    return RunSecurity(insecure=False, keys_dir=keys, tls_dir=tls_dir)


__all__ = ["ADVERSARY", "OPERATOR", "SIM", "SYBILS", "RunSecurity", "prepare_security"]
