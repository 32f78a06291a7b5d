"""The approval inbox (``agent-worker web``): where it listens, who may sign in, and the keys it vouches for answers
with (``AGENT_WEB_*``)."""

from __future__ import annotations

from typing import Annotated, Self
from urllib.parse import urlsplit

from pydantic import Field, IPvAnyNetwork, NonNegativeInt, PositiveFloat, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern
from agent_worker.passwords import check_hash


class WebSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_WEB_")

    approval_keys: list[Annotated[SecretStr, Field(min_length=32)]] = []
    """The keys the approval inbox signs the answers it vouches for with (``activities.vouching``), at least 32
    characters each, shared by the inbox and the workers: ``AGENT_WEB_APPROVAL_KEYS='["..."]'``. The inbox signs
    with the last; workers accept any, so a key is rotated by adding the new one last, then dropping the old.
    None: the workers take no answer as vouched for (signals still work, as claims)."""
    host: str = "127.0.0.1"
    """Where ``agent-worker web`` listens. Anything but a loopback address needs authentication configured
    (``users`` or ``proxy_header``): the inbox refuses to start otherwise."""
    port: int = Field(default=8088, ge=0, le=65535)
    base_path: str = ""
    """A path the inbox is served under, e.g. ``/inbox`` behind a proxy that serves other things too."""
    public_url: str | None = None
    """The address people open, e.g. ``https://inbox.example.com/inbox``. Set, the inbox answers only requests for
    that host and takes forms only from that origin; needed behind a single-sign-on proxy. Unset, the origin is
    the request's own, and on a loopback address only loopback host names are served (no DNS rebinding)."""
    confirm_above_cents: NonNegativeInt = 50_000
    """An approval in the inbox above this amount (in the smallest unit of the order's currency: 500.00) is asked
    once more, on a page of its own that states the amount, the order and the customer, before it is sent; the
    inbox refuses to send one without that confirmation. 0: every approval is confirmed."""
    users: dict[str, SecretStr] = {}
    """Standalone sign-in: each approver's name and password hash (``agent-worker web-user NAME`` makes one,
    argon2id; any other kind of hash stops the inbox at start):
    ``AGENT_WEB_USERS='{"ann": "$argon2id$v=19$m=65536,t=3,p=4$..."}'``. The name is the approver the workflow
    sees, so it is what ``options.approvers`` and ``AGENT_APPROVERS`` must list."""
    auditors: list[str] = []
    """Who may export the answers with the customers' personal data (``/export.csv?...&personal=1``: their
    addresses and the reasons people typed about them), by the name they sign in with:
    ``AGENT_WEB_AUDITORS='["carol"]'``. Empty (the default): nobody may, through the inbox; every approver still
    exports the answers without it. ``agent-worker answers export --personal`` is for whoever holds the database's
    credentials, and needs no inbox."""
    proxy_header: str | None = None
    """Behind single sign-on: the header the proxy names the signed-in person in, e.g. ``X-Forwarded-Email``
    (oauth2-proxy's). Believed only from ``trusted_proxies``."""
    trusted_proxies: list[IPvAnyNetwork] = []
    """The single-sign-on proxy's addresses (or networks), e.g. ``["127.0.0.1"]`` for a proxy on the same machine:
    the only connections whose ``proxy_header`` (and ``X-Forwarded-Proto``) the inbox believes."""
    session_hours: PositiveFloat = 12.0
    """How long a standalone sign-in lasts at most, however busy: its maximum age."""
    session_idle_minutes: PositiveFloat = 30.0
    """How long a standalone sign-in lasts without a request (counted to the minute): a browser left open on an
    unattended desk is signed out by then."""

    def approval_key_bytes(self) -> list[bytes]:
        return [key.get_secret_value().encode() for key in self.approval_keys]

    def user_hashes(self) -> dict[str, str]:
        return {name: stored.get_secret_value() for name, stored in self.users.items()}

    @field_validator("base_path")
    @classmethod
    def _base_path(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and (not value.startswith("/") or "//" in value or any(c in value for c in "?#'\"\\")):
            raise ValueError("a path such as /inbox")
        return value

    @field_validator("auditors")
    @classmethod
    def _auditors(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or name != name.strip():
                raise ValueError(f"an auditor's name as they sign in, without surrounding spaces, not {name!r}")
        return value

    @field_validator("users")
    @classmethod
    def _password_hashes(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, stored in value.items():
            if not name.strip() or name != name.strip():
                raise ValueError(f"an approver's name without surrounding spaces, not {name!r}")
            try:
                check_hash(stored.get_secret_value())
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        parts = urlsplit(value or "")
        if value and (parts.scheme.lower() not in {"http", "https"} or not parts.netloc):
            raise ValueError("an address such as https://inbox.example.com")
        return value or None

    @model_validator(mode="after")
    def _proxy_settings_come_together(self) -> Self:
        """A header believed from nobody would lock everyone out, and one believed without knowing the inbox's own
        address would let a page that re-points a host name at the proxy's machine (DNS rebinding) send it."""
        if self.proxy_header and not (self.trusted_proxies and self.public_url):
            raise ValueError(
                "AGENT_WEB_PROXY_HEADER needs AGENT_WEB_TRUSTED_PROXIES (the proxy's addresses, the only ones whose "
                "header is believed) and AGENT_WEB_PUBLIC_URL (the address people open through it)"
            )
        return self
