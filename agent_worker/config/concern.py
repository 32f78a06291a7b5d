"""What every concern's settings share: read from the environment (or a ``.env`` file) under the concern's own
prefix, so each nested model reads exactly the variables the flat settings did (``AGENT_SMTP_HOST`` is
``SmtpSettings.host``). A field whose variable lies outside the prefix names it in full (``validation_alias``);
code builds a concern by its fields' names and hands it to ``Settings`` nested:
``Settings(smtp=SmtpSettings(host=...))``."""

from __future__ import annotations

import ipaddress

from pydantic_settings import BaseSettings, SettingsConfigDict


class Concern(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", env_ignore_empty=True, validate_by_name=True, validate_by_alias=True
    )


def loopback(host: str) -> bool:
    """Whether ``host`` is this machine: an address in the loopback range, or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
