"""Credentials, subject permissions and TLS of a live deployment (secure by default).

``megha live up`` generates one random password per *role* into ``state_dir/auth/<role>.json`` (directory mode
0700, files 0600) and writes nats-server's configuration file ``state_dir/nats.conf`` (0600) with those users and
their permissions; nats-server is started with ``-c nats.conf``, so no secret is ever on a command line.

Roles and what they may do (``N`` is the deployment's subject namespace, ``cfg.name``):

* ``supervisor`` — everything; the only identity that may publish on ``N.control`` (shutdown);
* ``service`` — GMs, LMs and worker hosts: everything but ``N.control``;
* ``client`` (and ``client-1`` … ``client-<K-1>``, ``K`` = ``broker.clients``) — one identity per submitting
  client: publish job submissions to the GMs' inboxes (``N.q.<prefix>.gm<i>``) and run specifications to the
  worker hosts (``N.hosts``), read the task events of its own runs (a consumer on its own events stream
  ``N.ev.<k>`` only: task ids carry the client identity, and services publish each task's events to its
  client's stream), receive replies under its own inbox prefix only (``_INBOX.<user>.>``: no other client's
  deliveries), and read the status reports; nothing else (no launches, no LM or host inboxes, no replication
  logs, no control, no other client's events).

Services find their credentials through the configuration's ``state_dir``; a client on another machine copies
its ``auth/client-<k>.json`` there as ``auth/client.json`` (or sets ``broker.user``/``broker.password``). With
``broker.tls_cert``/``tls_key`` the broker requires TLS; clients verify it with ``broker.tls_ca``.
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
from pathlib import Path

from megha.live.config import LiveConfig
from megha.live.transport import events_stream, private_inbox, subject_of

ROLES = ("supervisor", "service", "client")


def identities(cfg: LiveConfig) -> list[tuple[str, str, int]]:
    """(file name, role, client identity) of every generated identity."""
    out = [("supervisor", "supervisor", 0), ("service", "service", 0), ("client", "client", 0)]
    out += [(f"client-{k}", "client", k) for k in range(1, cfg.broker.clients)]
    return out


def auth_dir(cfg: LiveConfig) -> Path:
    """Where the deployment's generated credentials are kept (``state_dir/auth``, one file per role)."""
    return Path(cfg.state_dir) / "auth"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def generate_credentials(cfg: LiveConfig) -> dict[str, dict[str, str]]:
    """New random credentials for every role, written to ``state_dir/auth`` (0600); returns them."""
    d = auth_dir(cfg)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    out = {}
    for name, role, k in identities(cfg):
        creds = {"user": f"{cfg.name}-{name}", "password": secrets.token_urlsafe(24), "role": role, "client": k}
        _write_private(d / f"{name}.json", json.dumps(creds))
        out[name] = creds
    return out


def read_credentials(cfg: LiveConfig, role: str) -> dict[str, str] | None:
    """The generated credentials of ``role`` (None when the deployment has none or they are not readable)."""
    try:
        doc = json.loads((auth_dir(cfg) / f"{role}.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("user"), str) or not isinstance(doc.get("password"), str):
        return None
    return doc


def _q(s: str) -> str:
    return json.dumps(s)


def permissions(cfg: LiveConfig, role: str, client: int = 0, user: str = "") -> dict:
    """Subject permissions of ``role`` (nats-server's ``permissions`` block); a client's are those of client
    identity ``client`` whose user name is ``user``."""
    from megha.live.deploy import layout_of

    ns = cfg.name
    control = subject_of(ns, "control")
    if role == "supervisor":
        return {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}}
    if role == "service":
        return {"publish": {"allow": [">"], "deny": [control]}, "subscribe": {"allow": [">"]}}
    prefix = layout_of(cfg).prefix
    gms = [subject_of(ns, f"q/{prefix}/gm{g}") for g in range(cfg.megha.gms)]
    ev_stream = events_stream(ns, client)
    inbox = private_inbox(user or f"{cfg.name}-client")
    return {
        "publish": {
            "allow": [
                *gms,
                subject_of(ns, "hosts"),
                f"$JS.API.CONSUMER.CREATE.{ev_stream}",
                f"$JS.API.CONSUMER.DELETE.{ev_stream}.*",
                f"$JS.API.CONSUMER.INFO.{ev_stream}.*",
            ]
        },
        "subscribe": {"allow": [inbox + ".>", subject_of(ns, "status")]},
    }


def _perm_block(p: dict) -> str:
    parts = []
    for k in ("publish", "subscribe"):
        v = p[k]
        inner = [f"allow: [{', '.join(_q(x) for x in v['allow'])}]"]
        if v.get("deny"):
            inner.append(f"deny: [{', '.join(_q(x) for x in v['deny'])}]")
        parts.append(f"{k}: {{ {', '.join(inner)} }}")
    return "{ " + ", ".join(parts) + " }"


def nats_config(cfg: LiveConfig, creds: dict[str, dict[str, str]] | None, store_dir: Path) -> str:
    """nats-server's configuration file for this deployment."""
    b = cfg.broker
    lines = [
        f"listen: {_q(f'{b.bind}:{b.port}')}",
        f"jetstream {{ store_dir: {_q(str(store_dir))} }}",
    ]
    if creds:
        users = [
            f"    {{ user: {_q(c['user'])}, password: {_q(c['password'])}, "
            f"permissions: {_perm_block(permissions(cfg, c.get('role', r), c.get('client', 0), c['user']))} }}"
            for r, c in creds.items()
        ]
        lines += ["authorization {", "  users: [", *users, "  ]", "}"]
    elif b.token:
        lines.append(f"authorization {{ token: {_q(b.token)} }}")
    elif b.user:
        lines.append(f"authorization {{ user: {_q(b.user)}, password: {_q(b.password)} }}")
    if b.tls_cert:
        tls = [f"cert_file: {_q(b.tls_cert)}", f"key_file: {_q(b.tls_key)}"]
        lines.append(f"tls {{ {', '.join(tls)} }}")
    return "\n".join(lines) + "\n"


def write_nats_config(cfg: LiveConfig, creds: dict | None, store_dir: Path) -> Path:
    """Write the broker's configuration (mode 0600) in the state directory; returns its path."""
    path = Path(cfg.state_dir) / "nats.conf"
    _write_private(path, nats_config(cfg, creds, store_dir))
    return path


def client_tls(cfg: LiveConfig) -> ssl.SSLContext | None:
    """The TLS context clients verify the broker with (None: plain TCP)."""
    b = cfg.broker
    if b.tls_ca:
        return ssl.create_default_context(cafile=b.tls_ca)
    if b.resolved_url().startswith("tls://"):
        return ssl.create_default_context()
    return None
