"""Who may read payloads: the codec's keys (``AGENT_CODEC_*``), and the codec server that decrypts them for the Web
UI and the ``temporal`` CLI (``AGENT_CODEC_SERVER_*``)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern
from agent_worker.defaults import ASYMMETRIC_ALGORITHMS


class CodecSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_CODEC_")

    keys: dict[str, SecretStr] = {}
    """Payload encryption keys by id, base64 (16, 24 or 32 bytes): ``AGENT_CODEC_KEYS='{"2026-11": "..."}'``.
    Empty: payloads are not encrypted (the embedded demo's default)."""
    key_id: str | None = None
    """The key new payloads are encrypted with; default the last one listed. Keep old keys listed after a
    rotation so what they encrypted still decrypts."""
    blobs_accept_plaintext: bool = Field(default=False, validation_alias="AGENT_BLOBS_ACCEPT_PLAINTEXT")
    """With codec keys set, also read content-store blobs that are not sealed: only while blobs written before
    encryption was switched on are still in use (a migration). Off, such a blob is refused, so a worker left
    without keys, writing customers' words in plain text, is noticed rather than trusted."""
    require_encrypted_input: bool = Field(default=False, validation_alias="AGENT_REQUIRE_ENCRYPTED_INPUT")
    """With codec keys set, refuse inputs and signals that arrive unencrypted (sent by a client without the
    codec, such as ``temporal workflow start`` without ``--codec-endpoint``) instead of only logging a
    warning: a ticket fails as ``InvalidTicketInput``, an approval is recorded as rejected. It changes how
    histories read, like a key: switch it on only once no open ticket has received a plain payload."""


class CodecServerSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_CODEC_SERVER_")

    origin: str = "http://localhost:8233"
    """The one origin (the Web UI) the codec server answers CORS requests from."""
    token: SecretStr | None = None
    """A static bearer token the codec server accepts, for the ``temporal`` CLI's ``--codec-auth`` and scripts.
    A secret every holder shares: people in a browser should come with the identity provider's JWT instead."""
    jwks_url: str | None = None
    """The identity provider's JWKS (its published signing keys), e.g.
    ``https://login.example.com/.well-known/jwks.json``: the codec server then takes the Web UI's single-sign-on
    access token, a JWT, checked against these keys, ``audience`` and ``issuer``."""
    audience: str | None = None
    """The ``aud`` the access tokens must carry (what the identity provider issues the Web UI's tokens for)."""
    issuer: str | None = None
    """The ``iss`` the access tokens must carry, e.g. ``https://login.example.com/``."""
    algorithms: list[str] = ["RS256"]
    """What the tokens may be signed with: asymmetric algorithms only (``none`` and ``HS*`` are refused)."""

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        if not value or not set(value) <= ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"only asymmetric algorithms: {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}")
        return value

    @model_validator(mode="after")
    def _jwt_settings_come_together(self) -> Self:
        named = {
            "AGENT_CODEC_SERVER_JWKS_URL": self.jwks_url,
            "AGENT_CODEC_SERVER_AUDIENCE": self.audience,
            "AGENT_CODEC_SERVER_ISSUER": self.issuer,
        }
        missing = [name for name, value in named.items() if value is None]
        if 0 < len(missing) < len(named):  # a token checked without its audience or issuer is half checked
            raise ValueError(f"the codec server's JWT settings go together: set {' and '.join(missing)} too")
        return self
