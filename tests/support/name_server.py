"""A name server for a process under test, on a loopback address: one that hears every question and answers none
(what a domain whose DNS never answers looks like to a resolver: a stranger can point a domain's name servers at
one), or one that answers TXT questions from the records it is given (``signed_mail.Domains``) and says
``NXDOMAIN`` to the rest. A process whose ``/etc/resolv.conf`` names it (``resolv_conf``, bound over the real one in
a mount namespace of its own by ``own_resolver``) asks it and nothing else; what it was asked is kept, as names,
for a test to count."""

from __future__ import annotations

import asyncio
import os
import random
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import dns.exception
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset


class NameServer(asyncio.DatagramProtocol):
    """UDP on ``host``:``port`` (53 unless told: ``resolv.conf`` names no port), answering from ``records`` (absolute
    names to TXT texts), or silent without them; ``asked`` counts each name asked."""

    def __init__(self, records: Mapping[bytes, bytes] | None = None, host: str | None = None, port: int = 53) -> None:
        self.records = records
        self.host = host or f"127.53.{random.randint(1, 254)}.{random.randint(1, 254)}"
        self.port = port
        self.asked: Counter[str] = Counter()
        self._transport: asyncio.DatagramTransport | None = None

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(self.host, self.port))
        self._transport = transport
        self.port = transport.get_extra_info("sockname")[1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._transport is not None:
            self._transport.close()

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException:
            return
        for asked in query.question:
            self.asked[asked.name.to_text().lower()] += 1
        if self.records is None or self._transport is None:
            return
        response = dns.message.make_response(query)
        for asked in query.question:
            found = self.records.get(asked.name.to_text().lower().encode())
            if found is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif asked.rdtype == dns.rdatatype.TXT:
                strings = " ".join(f'"{found[i : i + 255].decode()}"' for i in range(0, len(found), 255))
                response.answer.append(
                    dns.rrset.from_text(asked.name, 60, dns.rdataclass.IN, dns.rdatatype.TXT, strings)
                )
        self._transport.sendto(response.to_wire(), addr)

    def resolv_conf(self, directory: Path) -> Path:
        """A ``resolv.conf`` naming this server alone, written in ``directory``."""
        path = directory / "resolv.conf"
        path.write_text(f"nameserver {self.host}\noptions timeout:1 attempts:5\n")
        return path


def own_resolver(resolv_conf: Path, command: Sequence[str]) -> tuple[str, ...]:
    """``command`` run with ``resolv_conf`` as its ``/etc/resolv.conf``, and the machine's left as it is: a mount
    namespace of its own (``unshare -m``, root only), the file bound over the real one there, then ``exec``, so
    the process started is ``command`` itself (a signal sent to it reaches it)."""
    bind = f"mount --bind {shlex.quote(str(resolv_conf))} /etc/resolv.conf"
    return ("unshare", "-m", "sh", "-c", f'{bind} && exec "$@"', "sh", *command)


def can_own_resolver() -> bool:
    """Whether ``own_resolver`` can work here: root, and ``unshare`` on the path."""
    return os.geteuid() == 0 and any(
        (Path(directory) / "unshare").exists() for directory in os.environ.get("PATH", "").split(os.pathsep)
    )
