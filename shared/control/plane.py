"""The MQTT control plane: phases, liveness, model announcements and the observation feed.

Every privrec node (`sim`, `server`, each client shard, `adversary`) holds one `ControlPlane`, a
small async context manager over `aiomqtt.Client` (aiomqtt 2.5.x)::

    async with ControlPlane("mqtt://127.0.0.1:1883", run_id=run_id, node="shard-0") as cp:
        await cp.wait_for_phase("collect", timeout=60)
        async for phase in cp.phases():
            ...

Topics (built only by `shared.control.topics.topic_for`; all QoS 1; every payload except
observations is UTF-8 JSON):

- ``privrec/{run_id}/phase`` (retained): ``{"phase", "seq", "ts", "node", **info}``, signed by
  the orchestrator in a secure run (``"sig"``, `shared.control.announcements`).
- ``privrec/{run_id}/nodes/{node}/status`` (retained):
  ``{"node", "state": "online", "pid", "ts"}`` after connecting;
  ``{"node", "state": "offline", "reason": "stopped", "ts"}`` on a clean exit;
  ``{"node", "state": "offline", "reason": "lost"}`` as the last will (set by the broker).
- ``privrec/{run_id}/models`` (retained): ``{"node", "seq", "ts", **info}``.
- ``privrec/{run_id}/observations`` (not retained): opaque bytes (serialized protobuf records).

Who may publish and read which topic is the broker's business (`shared.control.acl`): with
mutual TLS both brokers permit topics by the client's certificate. A node that must not trust
the broker (every node of a secure run) also verifies each phase announcement against the run's
control keys (``control_keys``): an unsigned or wrongly signed announcement is dropped.

Design:

- One dispatcher task per connection reads aiomqtt's single message iterator and routes each
  message to the feeds whose topic filter matches (`shared.control.feeds`). No callbacks reach
  the user.
- Each topic filter is subscribed at the broker once per connection. For the retained topics
  (phase, status, models) the dispatcher caches the latest message per concrete topic and replays
  it to feeds created later, so a second local `phases()` feed still sees the current phase
  without a re-subscription (which would make the broker re-send retained messages to every feed).
- All feeds end (StopAsyncIteration) when the control plane exits and raise
  `ControlPlaneError` when the connection is lost or the broker refused the subscription.
- Observations are QoS 1 and not retained: a subscriber sees only what is published after its
  subscription is acknowledged. Use ``feed = await cp.observations().subscribed()`` before the
  phase in which the server starts publishing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self, TypeVar

import aiomqtt

from privrec.shared.control.announcements import (
    ControlKeys,
    Phase,
    check_reserved_keys,
    decode_json,
    encode,
    phase_reader,
    sign,
)
from privrec.shared.control.feeds import End, Feed, Subscription
from privrec.shared.control.topics import (
    ControlPlaneError,
    check_level,
    is_tls_url,
    parse_mqtt_url,
    topic_for,
)
from privrec.shared.errors import ConfigError
from privrec.shared.protocol import PHASES

if TYPE_CHECKING:
    from privrec.shared.identity import NodeIdentity

logger = logging.getLogger(__name__)

_QOS = 1

T = TypeVar("T")


# --------------------------------------------------------------------------- control plane


class ControlPlane:
    """One node's connection to the MQTT control plane (async context manager).

    Reusable (enter it again after leaving) but not re-entrant. On entering it connects with a
    retained QoS-1 last will ``{"node", "state": "offline", "reason": "lost"}`` on the node's
    status topic, then publishes ``{"node", "state": "online", "pid", "ts"}`` there (retained).
    Leaving publishes ``{"node", "state": "offline", "reason": "stopped", "ts"}`` (retained),
    ends every feed and disconnects cleanly (so the broker discards the will).

    Args:
        url: broker URL, ``mqtt://host:port`` or, over TLS, ``mqtts://host:port``.
        run_id: the run's identifier (one topic level).
        node: this node's name, e.g. "sim", "server", "shard-0", "adversary" (one topic level).
        timeout: seconds allowed for connecting and for each broker round trip.
        keepalive: MQTT keep-alive in seconds; a node that vanishes without closing its socket is
            declared lost by the broker after about 1.5 × this.
        tls_dir: a `privrec certs` directory for an ``mqtts://`` broker: trust its CA only and
            present ``NODE.pem`` (mutual TLS). Without it an ``mqtts://`` connection uses the
            system's trusted CAs and no client certificate.
        signer: the orchestrator's control key (its node id is `node`): every phase and model
            announcement is signed with it.
        control_keys: the run's control keys (`PublicRunConfig.control_keys`): phase
            announcements not signed by one of them are dropped. None (an insecure run) believes
            every announcement.

    Raises:
        ConfigError: `url`, `run_id` or `node` is malformed, or `signer` is not `node` (raised
            by the constructor).
    """

    def __init__(
        self,
        url: str,
        *,
        run_id: str,
        node: str,
        timeout: float = 5.0,
        keepalive: int = 15,
        tls_dir: str | os.PathLike[str] | None = None,
        signer: NodeIdentity | None = None,
        control_keys: ControlKeys | None = None,
    ) -> None:
        self._host, self._port = parse_mqtt_url(url)
        self._tls = is_tls_url(url)
        self._tls_dir = tls_dir
        check_level("run_id", run_id)
        check_level("node", node)
        if not timeout > 0:
            msg = f"`timeout` must be > 0, got {timeout!r}"
            raise ConfigError(msg)
        if signer is not None and signer.node_id != node:
            msg = f"`signer`: the control key of {signer.node_id!r} cannot sign as node {node!r}"
            raise ConfigError(msg)
        self._signer = signer
        self._control_keys = control_keys
        self.url = url
        self.run_id = run_id
        self.node = node
        self.timeout = float(timeout)
        self.keepalive = int(keepalive)
        self._client: aiomqtt.Client | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._subs: dict[str, Subscription] = {}
        self._failure: ControlPlaneError | None = None
        self._entered = False
        self._phase_seq = 0
        self._model_seq = 0

    # ----------------------------------------------------------------- topics

    @property
    def status_topic(self) -> str:
        """This node's status topic, ``privrec/{run_id}/nodes/{node}/status``."""
        return topic_for(self.run_id, "nodes", self.node, "status")

    @property
    def phase_topic(self) -> str:
        """``privrec/{run_id}/phase``."""
        return topic_for(self.run_id, "phase")

    @property
    def observations_topic(self) -> str:
        """``privrec/{run_id}/observations``."""
        return topic_for(self.run_id, "observations")

    @property
    def models_topic(self) -> str:
        """``privrec/{run_id}/models``."""
        return topic_for(self.run_id, "models")

    @property
    def connected(self) -> bool:
        """True between a successful enter and the exit, unless the connection was lost."""
        return self._client is not None and self._failure is None

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        """Connect, start the dispatcher and publish the "online" status.

        Raises:
            ControlPlaneError: already entered, or the broker is unreachable or refused us.
        """
        if self._entered:
            msg = "ControlPlane is reusable but not re-entrant"
            raise ControlPlaneError(msg, url=self.url)
        self._entered = True
        try:
            await self._connect()
        except BaseException:
            self._entered = False
            raise
        return self

    async def _connect(self) -> None:
        will = aiomqtt.Will(
            topic=self.status_topic,
            payload=encode({"node": self.node, "state": "offline", "reason": "lost"}),
            qos=_QOS,
            retain=True,
        )
        client = aiomqtt.Client(
            self._host,
            self._port,
            identifier=f"privrec-{self.node}-{os.getpid()}-{secrets.token_hex(3)}",
            will=will,
            clean_session=True,
            timeout=self.timeout,
            keepalive=self.keepalive,
            logger=logging.getLogger(f"{__name__}.mqtt"),
            tls_context=self._tls_context(),
        )
        try:
            # aiomqtt bounds the CONNACK wait; the outer bound also covers a TCP connect that
            # hangs (e.g. a firewalled host), which paho would otherwise wait out on its own.
            async with asyncio.timeout(self.timeout + 1.0):
                await client.__aenter__()
        except (aiomqtt.MqttError, TimeoutError) as exc:
            msg = f"cannot connect to MQTT broker at {self.url}: {exc or 'timed out'}"
            raise ControlPlaneError(msg, url=self.url) from exc
        self._client = client
        self._failure = None
        self._subs = {}
        self._dispatcher = asyncio.create_task(
            self._dispatch(client), name=f"privrec[{self.node}].control-dispatch"
        )
        try:
            await self._publish(
                self.status_topic,
                encode(
                    {"node": self.node, "state": "online", "pid": os.getpid(), "ts": time.time()}
                ),
                retain=True,
            )
        except BaseException:
            await self._teardown()
            raise
        logger.info("control plane %s connected as %r (run %s)", self.url, self.node, self.run_id)

    def _tls_context(self) -> ssl.SSLContext | None:
        if not self._tls:
            return None
        if self._tls_dir is None:
            return ssl.create_default_context()
        from privrec.shared.tls import client_ssl_context

        return client_ssl_context(os.fspath(self._tls_dir), self.node)

    async def __aexit__(self, *exc: object) -> None:
        """Publish the "stopped" status, end every feed and disconnect."""
        try:
            if self.connected:
                payload = {"node": self.node, "state": "offline", "reason": "stopped"}
                try:
                    await self._publish(
                        self.status_topic, encode({**payload, "ts": time.time()}), retain=True
                    )
                except ControlPlaneError as err:
                    logger.warning("could not publish stopped status: %s", err)
        finally:
            await self._teardown()
            self._entered = False

    async def _teardown(self) -> None:
        client, self._client = self._client, None
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dispatcher
        for sub in self._subs.values():
            if sub.suback is not None and not sub.suback.done():
                sub.suback.cancel()
            sub.end(self._failure)
        self._subs = {}
        if client is not None:
            try:
                await client.__aexit__(None, None, None)
            except aiomqtt.MqttError as err:
                logger.debug("disconnect from %s: %s", self.url, err)

    async def _dispatch(self, client: aiomqtt.Client) -> None:
        """Route every incoming message to the feeds whose filter it matches."""
        try:
            async for message in client.messages:
                for sub in self._subs.values():
                    if not message.topic.matches(sub.topic_filter):
                        continue
                    if sub.cache_latest:
                        if message.payload:
                            sub.latest[message.topic.value] = message
                        else:
                            sub.latest.pop(message.topic.value, None)
                    for feed in list(sub.feeds):
                        feed.push(message)
        except aiomqtt.MqttError as exc:
            err = ControlPlaneError(
                f"lost connection to MQTT broker at {self.url}: {exc}", url=self.url
            )
            logger.error("%s", err)
            self._failure = err
            for sub in self._subs.values():
                sub.end(err)

    # ----------------------------------------------------------------- plumbing

    def _require_client(self) -> aiomqtt.Client:
        if self._failure is not None:
            raise self._failure
        if self._client is None:
            msg = f"ControlPlane for {self.url} is not connected; use `async with`"
            raise ControlPlaneError(msg, url=self.url)
        return self._client

    async def _publish(self, topic: str, payload: bytes, *, retain: bool) -> None:
        client = self._require_client()
        try:
            await client.publish(topic, payload, qos=_QOS, retain=retain)
        except aiomqtt.MqttError as exc:
            msg = f"publish to {topic} via {self.url} failed: {exc}"
            raise ControlPlaneError(msg, url=self.url) from exc

    async def _subscribe(self, client: aiomqtt.Client, sub: Subscription) -> None:
        try:
            granted = await client.subscribe(sub.topic_filter, qos=_QOS)
        except aiomqtt.MqttError as exc:
            msg = f"subscribe to {sub.topic_filter} via {self.url} failed: {exc}"
            sub.error = ControlPlaneError(msg, url=self.url)
        else:
            if any(_code(g) >= 0x80 for g in granted or ()):  # the broker's refusal (SUBACK)
                msg = (
                    f"subscribe to {sub.topic_filter} via {self.url} refused by the broker "
                    f"(node {self.node!r} may not read it)"
                )
                sub.error = ControlPlaneError(msg, url=self.url)
        if sub.error is not None:
            sub.end(sub.error)

    def _feed(
        self,
        topic_filter: str,
        convert: Callable[[aiomqtt.Message], T | None],
        *,
        cache_latest: bool,
    ) -> Feed[T]:
        client = self._require_client()
        sub = self._subs.get(topic_filter)
        fresh = sub is None
        if sub is None:
            sub = self._subs[topic_filter] = Subscription(topic_filter, cache_latest=cache_latest)
        feed = Feed(sub, convert)
        for message in sub.latest.values():
            feed.push(message)
        if sub.error is not None:
            feed.push(End(sub.error))
        sub.feeds.add(feed)
        if fresh:
            sub.suback = asyncio.create_task(
                self._subscribe(client, sub), name=f"privrec[{self.node}].subscribe"
            )
        return feed

    # ----------------------------------------------------------------- phases

    async def announce_phase(self, phase: str, **info: Any) -> Phase:
        """Announce the run's current phase (retained, QoS 1).

        Only one node (normally `sim`) should announce phases in a run: `seq` counts this
        instance's announcements, and readers drop announcements whose `seq` is not greater than
        the last one they yielded. With a `signer` the announcement is signed.

        Args:
            phase: one of `PHASES`.
            **info: further JSON-serialisable keys of the announcement (not "phase", "seq",
                "ts", "node").

        Returns:
            The announced phase.

        Raises:
            ValueError: `phase` is unknown or `info` uses a reserved key.
            ControlPlaneError: not connected or the publish failed.
        """
        if phase not in PHASES:
            msg = f"`phase` must be one of {PHASES}, got {phase!r}"
            raise ValueError(msg)
        check_reserved_keys(info, ("phase", "seq", "ts", "node", "sig"))
        self._phase_seq += 1
        announced = Phase(phase, self._phase_seq, time.time(), self.node, dict(info))
        payload = {"phase": phase, "seq": announced.seq, "ts": announced.ts, "node": self.node}
        await self._publish_control(self.phase_topic, {**payload, **info})
        logger.info("phase %s (seq %d) announced for run %s", phase, announced.seq, self.run_id)
        return announced

    def phases(self) -> Feed[Phase]:
        """Feed of phase announcements, oldest first, starting with the retained current one.

        Duplicates and out-of-order announcements (seq not above the last yielded) are dropped,
        as are announcements of unknown phases and, with `control_keys`, every announcement not
        signed by one of them (`shared.control.announcements.phase_reader`).

        Returns:
            A `Feed` of `Phase`.

        Raises:
            ControlPlaneError: not connected.
        """
        convert = phase_reader(self.phase_topic, self._control_keys)
        return self._feed(self.phase_topic, convert, cache_latest=True)

    async def wait_for_phase(self, name: str, timeout: float | None = None) -> Phase:
        """Wait until phase `name`, or a later one, is announced (or already current).

        A node that joins late must not hang waiting for a phase that has already passed, so any
        phase at or after `name` in `PHASES` order satisfies the wait; check `.name` on the
        result if the difference matters.

        Args:
            name: one of `PHASES`.
            timeout: seconds to wait; None waits indefinitely.

        Returns:
            The first announced phase at or after `name`.

        Raises:
            ValueError: `name` is not a phase.
            TimeoutError: no such phase within `timeout` seconds.
            ControlPlaneError: not connected or the connection was lost.
        """
        if name not in PHASES:
            msg = f"`name` must be one of {PHASES}, got {name!r}"
            raise ValueError(msg)
        target = PHASES.index(name)
        async with self.phases() as feed:
            try:
                async with asyncio.timeout(timeout):
                    async for phase in feed:
                        if phase.index >= target:
                            return phase
            except TimeoutError:
                msg = f"phase {name!r} not announced on {self.phase_topic} within {timeout} s"
                raise TimeoutError(msg) from None
        msg = f"control plane closed while waiting for phase {name!r}"
        raise ControlPlaneError(msg, url=self.url)

    # ----------------------------------------------------------------- observations

    async def publish_observation(self, payload: bytes) -> None:
        """Publish one record on the observation feed (QoS 1, not retained).

        Args:
            payload: opaque bytes (a serialized protobuf record).

        Raises:
            TypeError: `payload` is not bytes-like.
            ControlPlaneError: not connected or the publish failed.
        """
        if not isinstance(payload, bytes | bytearray | memoryview):  # callers may be untyped
            msg = f"`payload` must be bytes, got {type(payload).__name__}"  # type: ignore[unreachable]
            raise TypeError(msg)
        await self._publish(self.observations_topic, bytes(payload), retain=False)

    def observations(self) -> Feed[bytes]:
        """Feed of observation records published after the subscription took effect.

        Returns:
            A `Feed` of the raw payload bytes; ``await feed.subscribed()`` before relying on
            receiving a particular record.

        Raises:
            ControlPlaneError: not connected.
        """
        return self._feed(self.observations_topic, _payload_bytes, cache_latest=False)

    # ----------------------------------------------------------------- models and statuses

    async def publish_model_announcement(self, **info: Any) -> dict[str, Any]:
        """Announce a trained model (retained JSON, QoS 1).

        Args:
            **info: JSON-serialisable description, e.g. ``name="knn", version=3``
                (not "node", "seq", "ts").

        Returns:
            The published announcement.

        Raises:
            ValueError: `info` uses a reserved key.
            ControlPlaneError: not connected or the publish failed.
        """
        check_reserved_keys(info, ("node", "seq", "ts", "sig"))
        self._model_seq += 1
        announcement = {"node": self.node, "seq": self._model_seq, "ts": time.time(), **info}
        await self._publish_control(self.models_topic, announcement)
        return announcement

    async def _publish_control(self, topic: str, body: dict[str, Any]) -> None:
        """Publish a retained control message, signed when this plane has a signer."""
        if self._signer is not None:
            body = sign(self._signer, topic, body)
        await self._publish(topic, encode(body), retain=True)

    def model_announcements(self) -> Feed[dict[str, Any]]:
        """Feed of model announcements, starting with the retained latest one.

        Returns:
            A `Feed` of announcement dicts.

        Raises:
            ControlPlaneError: not connected.
        """
        return self._feed(self.models_topic, decode_json, cache_latest=True)

    def node_statuses(self) -> Feed[tuple[str, dict[str, Any]]]:
        """Feed of ``(node, status)`` for every node of the run, retained ones first.

        Returns:
            A `Feed` of (node name, status dict) pairs; status has at least "state".

        Raises:
            ControlPlaneError: not connected.
        """
        return self._feed(
            topic_for(self.run_id, "nodes", "+", "status"), _node_status, cache_latest=True
        )


def _payload_bytes(message: aiomqtt.Message) -> bytes:
    return bytes(message.payload)


def _code(granted: Any) -> int:
    """A SUBACK entry as a number (aiomqtt gives an int for MQTT 3.1.1, a reason code for 5)."""
    return int(getattr(granted, "value", granted))


def _node_status(message: aiomqtt.Message) -> tuple[str, dict[str, Any]] | None:
    obj = decode_json(message)
    if obj is None:
        return None
    # privrec/{run_id}/nodes/{node}/status
    return message.topic.value.split("/")[3], obj


__all__ = ["ControlPlane", "Feed", "Phase"]
