"""Whether an address means this machine alone: the test every program that listens makes before it serves
without authentication (the codec server, the inbox), and the inbox's check of where a request came from."""

from __future__ import annotations

import ipaddress
import socket


def loopback_name(host: str | None) -> bool:
    """A host name that means this machine without asking DNS: ``localhost`` or a loopback address."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_only(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine alone: every address it resolves to is a loopback
    one (an empty host, ``0.0.0.0`` or ``::`` means every interface)."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host or None, None)}
    except socket.gaierror:
        return False
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)
