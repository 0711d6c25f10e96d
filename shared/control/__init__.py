"""The MQTT control plane every node shares: topics (`topics`), who may use them (`acl`), signed
control messages (`announcements`), feeds (`feeds`) and the plane itself (`plane`).

It lives in `shared` because every node — server, client shards, adversary, orchestrator —
holds one; see `shared.control.plane` for the topics, payloads and design.
"""

from privrec.shared.control.announcements import ControlKeys, Phase
from privrec.shared.control.feeds import Feed
from privrec.shared.control.plane import ControlPlane
from privrec.shared.control.topics import (
    DEFAULT_PORT,
    TOPIC_ROOT,
    ControlPlaneError,
    parse_mqtt_url,
    topic_for,
)
from privrec.shared.protocol import PHASES

__all__ = [
    "DEFAULT_PORT",
    "PHASES",
    "TOPIC_ROOT",
    "ControlKeys",
    "ControlPlane",
    "ControlPlaneError",
    "Feed",
    "Phase",
    "parse_mqtt_url",
    "topic_for",
]
