"""Who may read decrypted payloads from the codec server: a bearer token, checked before anything is decoded.

The codec server turns every ticket's ciphertext back into a customer's words, so on any address but the
loopback it must know who asks. Two kinds of bearer token are taken, and either may be configured alone:

- **A JWT access token** from the company's identity provider: what Temporal's Web UI sends when it has
  single sign-on and passes the signed-in person's token on (``TEMPORAL_CODEC_PASS_ACCESS_TOKEN``). It is
  checked against the provider's published keys (JWKS), for the configured audience and issuer, with an
  expiry, and only with the asymmetric algorithms configured: ``none`` and the HMAC family are never
  accepted, so a token "signed" with nothing, or with the provider's *public* key used as an HMAC secret
  (the classic algorithm confusion), opens nothing.
- **A static shared token**, for the ``temporal`` CLI (``--codec-auth "Bearer ..."``) and scripts, which have
  no browser sign-in. It is a secret every holder shares, so it names nobody; prefer the JWT for people.

Without either, the codec server serves only on the loopback (``agent_worker.codec_server.app``).
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass, field
from typing import Any

import jwt

from agent_worker.defaults import ASYMMETRIC_ALGORITHMS

SHARED_HOLDER = "holder of the static token"
"""Who a request authenticated with the shared token is, in the log: the token names nobody."""


class UnauthorizedError(Exception):
    """The request's credentials do not pass: the message says why, for the 401's body."""


class KeysUnavailableError(Exception):
    """The identity provider's keys could not be fetched: the codec server's problem, not the caller's (503)."""


@dataclass
class JwtValidator:
    """Checks an access token against the identity provider's JWKS, audience and issuer.

    The keys are fetched on first use and cached by ``PyJWKClient`` (five minutes; a token signed by a key
    not in the cache refetches at most every 30 s, so a stream of forged key ids cannot hammer the provider).
    The fetch is blocking ``urllib``, so it runs in a thread."""

    jwks_url: str
    audience: str
    issuer: str
    algorithms: tuple[str, ...] = ("RS256",)
    _keys: jwt.PyJWKClient = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.algorithms or not set(self.algorithms) <= ASYMMETRIC_ALGORITHMS:
            raise ValueError(
                f"JWT algorithms must be asymmetric ones ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))}), "
                f"got {list(self.algorithms)}"
            )
        self._keys = jwt.PyJWKClient(self.jwks_url, cache_keys=True, timeout=10)

    async def subject(self, token: str) -> str:
        """Who the token names (its ``sub``), or ``UnauthorizedError`` saying what is wrong with it."""
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.DecodeError:
            raise UnauthorizedError("the bearer token is not a JWT") from None
        if algorithm not in self.algorithms:
            raise UnauthorizedError(
                f"the access token's algorithm {algorithm!r} is not allowed (allowed: {', '.join(self.algorithms)})"
            )
        try:
            key = await asyncio.to_thread(self._keys.get_signing_key_from_jwt, token)
        except (jwt.PyJWKClientConnectionError, jwt.PyJWKSetError) as error:
            raise KeysUnavailableError(f"cannot fetch the identity provider's keys: {error}") from None
        except jwt.PyJWKClientError:
            raise UnauthorizedError(
                "the access token is signed by a key the identity provider does not publish"
            ) from None
        except jwt.DecodeError:
            raise UnauthorizedError("the bearer token is not a JWT") from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidTokenError as error:
            raise UnauthorizedError(_why(error)) from None
        return str(claims.get("sub") or claims.get("email") or "an unnamed subject")


def _why(error: jwt.InvalidTokenError) -> str:
    """A person's reading of PyJWT's error: what to fix, not which exception."""
    reasons: list[tuple[type[jwt.InvalidTokenError], str]] = [
        (jwt.ExpiredSignatureError, "the access token has expired: sign in again"),
        (jwt.InvalidAudienceError, "the access token is for another audience than this codec server's"),
        (jwt.InvalidIssuerError, "the access token was issued by another identity provider than the configured one"),
        (jwt.InvalidSignatureError, "the access token's signature does not verify"),
        (jwt.InvalidAlgorithmError, "the access token's algorithm is not allowed"),
        (jwt.MissingRequiredClaimError, f"the access token is incomplete: {error}"),
        (jwt.ImmatureSignatureError, "the access token is not valid yet"),
    ]
    fallback = f"the access token is invalid: {error}"
    return next((reason for kind, reason in reasons if isinstance(error, kind)), fallback)


@dataclass
class BearerAuth:
    """The codec server's authentication: the static token, a JWT from the identity provider, or either."""

    token: str | None = None
    validator: JwtValidator | None = None

    def __post_init__(self) -> None:
        if self.token is None and self.validator is None:
            raise ValueError("bearer authentication needs a static token, a JWT validator, or both")

    async def identify(self, authorization: str | None) -> str:
        """Who sent the request, from its ``Authorization`` header; ``UnauthorizedError`` if nobody we know."""
        scheme, _, credential = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            raise UnauthorizedError(
                "a bearer token is required: the Web UI sends one when it has single sign-on and passes the "
                "access token on; the temporal CLI sends --codec-auth 'Bearer ...'"
            )
        credential = credential.strip()
        if self.token is not None and hmac.compare_digest(credential.encode(), self.token.encode()):
            return SHARED_HOLDER
        if self.validator is None:
            raise UnauthorizedError("the bearer token is not this codec server's token")
        if self.token is not None and credential.count(".") != 2:  # a JWT has three parts
            raise UnauthorizedError("the bearer token is neither this codec server's token nor a JWT")
        return await self.validator.subject(credential)
