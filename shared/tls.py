"""TLS for every channel: a private CA, and the server, broker and node certificates it signs.

`privrec certs` (and `privrec sim`, on its own, in ``RUN_DIR/secrets/tls``) calls `make_certs`,
which writes with `cryptography`:

* ``ca.pem`` / ``ca.key``: a self-signed CA (ECDSA P-256), valid `days` days;
* ``server.pem`` / ``server.key``: the aggregator (serverAuth, and clientAuth for its MQTT
  connection; SANs: localhost, 127.0.0.1, ::1
  and every `hosts` entry);
* ``broker.pem`` / ``broker.key``: the MQTT broker (the same SANs);
* ``NODE.pem`` / ``NODE.key``: one client certificate per node (clientAuth, CN = the node);
* ``mosquitto.acl`` and ``mosquitto.conf``: the control plane's topic permissions by certificate
  (`shared.control.acl`) and a Mosquitto listener that enforces them (``mosquitto -c``).

Private keys are created 0600. The same directory serves every role: the server reads
``ca.pem server.pem server.key`` and requires a client certificate signed by the CA (mutual
TLS); a node reads ``ca.pem NODE.pem NODE.key``. `server_credentials`, `channel_credentials`,
`server_ssl_context` and `client_ssl_context` turn a directory into what gRPC and MQTT need.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import ssl
from collections.abc import Sequence
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privrec.shared.errors import ConfigError
from privrec.shared.identity import check_node_id, write_private

SERVER = "server"
BROKER = "broker"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
SERVER_NAME = "localhost"
"""The name clients check the server's certificate against (it is among the SANs)."""


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """One role's TLS files in a certificate directory."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def of(cls, directory: str | Path, role: str) -> TlsFiles:
        """``ca.pem``, ``ROLE.pem`` and ``ROLE.key`` in `directory`.

        Raises:
            ConfigError: one of them is missing.
        """
        d = Path(directory)
        files = cls(d / "ca.pem", d / f"{role}.pem", d / f"{role}.key")
        for p in (files.ca, files.cert, files.key):
            if not p.is_file():
                raise ConfigError(
                    f"--tls-dir: {d} has no {p.name} (make it with `privrec certs --out {d} "
                    f"{role if role not in (SERVER, BROKER) else ''}`)".replace(" `)", "`)")
                )
        return files

    def read(self) -> tuple[bytes, bytes, bytes]:
        """The CA certificate, node certificate and key as bytes."""
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "privrec"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _sans(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def make_certs(
    directory: str | Path,
    nodes: Sequence[str],
    *,
    hosts: Sequence[str] = (),
    days: int = 30,
) -> Path:
    """Write a CA, the server and broker certificates and one client certificate per node
    into `directory` (created 0700). An existing CA is reused and existing server and broker
    certificates are kept (unless `hosts` is given), so nodes can be added later.

    Args:
        directory: where the files go.
        nodes: node names (`privrec.shared.identity.check_node_id`), e.g. shard-0, adversary,
            operator.
        hosts: extra names or addresses the server and broker are reached at.
        days: validity.

    Returns:
        `directory`.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    if (d / "ca.pem").exists() and (d / "ca.key").exists():
        ca_cert = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
        loaded = serialization.load_pem_private_key((d / "ca.key").read_bytes(), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{d / 'ca.key'} is not an EC key")
        ca_key = loaded
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("privrec CA"))
            .issuer_name(_name("privrec CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        write_private(d / "ca.key", _key_pem(ca_key))
        (d / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        role: str, cn: str, usage: Sequence[x509.ObjectIdentifier], sans: Sequence[str]
    ) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
        )
        if sans:
            builder = builder.add_extension(_sans(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        write_private(d / f"{role}.key", _key_pem(key))
        (d / f"{role}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    all_hosts = [*DEFAULT_HOSTS, *hosts]
    for role in (SERVER, BROKER):
        if (d / f"{role}.pem").exists() and not hosts:
            continue  # adding nodes keeps the certificates a running server or broker holds
        # the server is also an MQTT client (it publishes the observation feed)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        issue(role, f"privrec {role}", usage, all_hosts)
    for node in nodes:
        check_node_id(node)
        if node in (SERVER, BROKER, "ca"):
            raise ConfigError(f"node name {node!r} is reserved for the CA, server or broker")
        issue(node, node, [ExtendedKeyUsageOID.CLIENT_AUTH], ())
    from privrec.shared.control.acl import write_mosquitto_files

    write_mosquitto_files(d)
    return d


# ------------------------------------------------------------------------- gRPC
def server_credentials(directory: str | Path) -> grpc.ServerCredentials:
    """The aggregator's credentials: its certificate, and a client certificate signed by the
    CA required from every caller (mutual TLS)."""
    ca, cert, key = TlsFiles.of(directory, SERVER).read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=True
    )


def channel_credentials(directory: str | Path, node: str) -> grpc.ChannelCredentials:
    """A node's channel credentials: trust the CA only, present ``NODE.pem``."""
    ca, cert, key = TlsFiles.of(directory, node).read()
    return grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert
    )


CHANNEL_OPTIONS = (("grpc.ssl_target_name_override", SERVER_NAME),)
"""Clients check the server's certificate for `SERVER_NAME`, whatever address they dial."""


# ------------------------------------------------------------------------- MQTT
def server_ssl_context(directory: str | Path, role: str = BROKER) -> ssl.SSLContext:
    """The broker's TLS context (mutual TLS: clients must present a CA-signed certificate)."""
    files = TlsFiles.of(directory, role)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(files.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_ssl_context(directory: str | Path, node: str) -> ssl.SSLContext:
    """A node's TLS context for the broker: trust the CA only, present ``NODE.pem``."""
    files = TlsFiles.of(directory, node)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(files.ca)
    ctx.load_cert_chain(files.cert, files.key)
    ctx.check_hostname = True
    return ctx


__all__ = [
    "BROKER",
    "CHANNEL_OPTIONS",
    "SERVER",
    "SERVER_NAME",
    "TlsFiles",
    "channel_credentials",
    "client_ssl_context",
    "make_certs",
    "server_credentials",
    "server_ssl_context",
]
