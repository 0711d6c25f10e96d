"""`privrec certs` and `privrec keys`, and the security options of the node commands.

For a hand-started run the operator makes, once::

    privrec certs --out runs/manual/tls shard-0 shard-1 adversary operator
    privrec keys  --out runs/manual/keys shard-0 shard-1 adversary

then starts the server with ``--tls-dir runs/manual/tls --allow-list
runs/manual/keys/allow-list.json`` and each node with ``--tls-dir runs/manual/tls --node-key
runs/manual/keys/NODE.key`` (the node's name is the key file's stem). ``--insecure`` runs a node
without either, and says so loudly.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privrec.shared.errors import ConfigError

if TYPE_CHECKING:
    from privrec.shared.identity import NodeIdentity

ALLOW_LIST_NAME = "allow-list.json"  # = privrec.shared.identity.ALLOW_LIST_NAME (lazy import)

logger = logging.getLogger(__name__)

INSECURE_NODE_WARNING = (
    "INSECURE: this node talks plaintext and signs nothing; its users can be impersonated "
    "(--insecure)"
)


def add_server_security_args(p: argparse.ArgumentParser) -> None:
    """`privrec server` options."""
    p.add_argument("--allow-list", help="the nodes the server accepts (`privrec keys`)")
    p.add_argument("--tls-dir", help="certificate directory (`privrec certs`): mutual TLS")
    p.add_argument(
        "--insecure", action="store_true", help="no TLS, no node authentication (loudly)"
    )


def add_node_security_args(p: argparse.ArgumentParser) -> None:
    """`privrec clients` / `privrec adversary` options."""
    p.add_argument("--node-key", help="this node's Ed25519 key (`privrec keys`); name = stem")
    p.add_argument("--tls-dir", help="certificate directory (`privrec certs`): mutual TLS")
    p.add_argument("--insecure", action="store_true", help="no TLS, no signatures (loudly)")


def server_security(args: argparse.Namespace) -> Any:
    """The `server.node.ServerSecurity` of the command line."""
    from privrec.server.node import ServerSecurity

    if args.insecure and (args.allow_list or args.tls_dir):
        raise ConfigError("--insecure: not with --allow-list or --tls-dir")
    return ServerSecurity(
        allow_list=Path(args.allow_list) if args.allow_list else None,
        tls_dir=Path(args.tls_dir) if args.tls_dir else None,
        insecure=args.insecure,
    )


def node_security(
    args: argparse.Namespace, default_node: str
) -> tuple[NodeIdentity | None, Path | None, str]:
    """(identity, TLS directory, node name) of a node's command line.

    Raises:
        ConfigError: neither --node-key and --tls-dir nor --insecure; or a mixture.
    """
    if args.insecure:
        if args.node_key or args.tls_dir:
            raise ConfigError("--insecure: not with --node-key or --tls-dir")
        logger.warning(INSECURE_NODE_WARNING)
        return None, None, default_node
    if not args.node_key or not args.tls_dir:
        raise ConfigError(
            "node security: give --node-key FILE and --tls-dir DIR (`privrec keys`, "
            "`privrec certs`), or --insecure"
        )
    from privrec.shared.identity import NodeIdentity

    identity = NodeIdentity.load(args.node_key)
    return identity, Path(args.tls_dir), identity.node_id


def cmd_certs(args: argparse.Namespace) -> int:
    from privrec.shared.tls import make_certs

    out = make_certs(args.out, args.nodes, hosts=args.host or (), days=args.days)
    print(f"certificates in {out}: ca, server, broker, {', '.join(args.nodes) or '(no nodes)'}")
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from privrec.shared.identity import make_keys

    if not args.nodes and not args.control:
        raise ConfigError("privrec keys: name at least one NODE or --control NAME")
    allow = make_keys(args.out, args.nodes, args.control or ())
    print(
        f"{len(allow.nodes)} nodes in {Path(args.out) / ALLOW_LIST_NAME}: {', '.join(allow.nodes)}"
        + (f"; control keys: {', '.join(allow.control)}" if allow.control else "")
    )
    return 0


def _node_name(value: str) -> str:
    from privrec.shared.identity import check_node_id

    try:
        return check_node_id(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_security_commands(sub: Any) -> None:
    """Register `privrec certs` and `privrec keys`."""
    p = sub.add_parser(
        "certs",
        help="make a CA and the server, broker and node certificates (TLS)",
        description="Write a CA (reused if present), server and broker certificates and one "
        "client certificate per NODE into DIR; private keys are created 0600.",
    )
    p.add_argument("nodes", metavar="NODE", nargs="*", type=_node_name, help="node names")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write into")
    p.add_argument(
        "--host", action="append", help="another name or address of the server (repeatable)"
    )
    p.add_argument("--days", type=int, default=30, help="validity in days (default 30)")
    p.set_defaults(func=cmd_certs)

    p = sub.add_parser(
        "keys",
        help="make node key pairs and the server's allow-list (node authentication)",
        description="Write an Ed25519 key pair per NODE into DIR (kept if present; keys 0600) "
        f"and DIR/{ALLOW_LIST_NAME} listing every NODE.pub there.",
    )
    p.add_argument("nodes", metavar="NODE", nargs="*", type=_node_name, help="node names")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write into")
    p.add_argument(
        "--control",
        metavar="NAME",
        action="append",
        type=_node_name,
        help="a control key (repeatable): it signs phase announcements on MQTT and acts for "
        "no user, e.g. operator",
    )
    p.set_defaults(func=cmd_keys)


def warn_insecure_run() -> None:
    """What `privrec sim --insecure` prints before anything starts."""
    print(
        "privrec: WARNING: --insecure: no TLS and no node authentication; every node can act "
        "as any user and everything travels in plaintext",
        file=sys.stderr,
    )


__all__ = [
    "add_node_security_args",
    "add_security_commands",
    "add_server_security_args",
    "node_security",
    "server_security",
    "warn_insecure_run",
]
