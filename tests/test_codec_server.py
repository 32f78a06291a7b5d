"""The codec server's two modes: local (no sign-on, loopback only) and the identity provider's access tokens.

The identity provider is a JWKS served on 127.0.0.1 with an RSA key made here; tokens are signed with it,
or forged the ways an attacker would (another key, ``alg: none``, the public key used as an HMAC secret).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
import structlog
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.protobuf import json_format
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload

from agent_worker import wiring
from agent_worker.cli.devserver import binary, free_port
from agent_worker.codec import EncryptionCodec
from agent_worker.codec_server.app import MAX_BODY_BYTES, UnsafeBindError, serve
from agent_worker.codec_server.auth import BearerAuth, JwtValidator
from agent_worker.config import Settings
from agent_worker.config.codec_settings import CodecServerSettings
from agent_worker.serving import Serving
from tests.support.processes import agent_worker_dev, listening

UI = "http://localhost:8233"
AUDIENCE = "temporal-ui"
ISSUER = "https://login.example.test/"
KID = "signing-2026"
KEY = os.urandom(32)


def codec() -> EncryptionCodec:
    return EncryptionCodec({"2026-11": KEY}, "2026-11")


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def stranger_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
async def jwks_url(signing_key: rsa.RSAPrivateKey) -> AsyncIterator[str]:
    """The identity provider's published keys, as ``/.well-known/jwks.json`` on 127.0.0.1."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    keys = {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    async def serve_keys(_request: web.Request) -> web.Response:
        return web.json_response(keys)

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", serve_keys)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}/.well-known/jwks.json"
    await runner.cleanup()


async def start(auth: BearerAuth | None) -> tuple[Serving, str]:
    port = free_port()
    return await serve(codec(), auth, UI, "127.0.0.1", port), f"http://127.0.0.1:{port}"


@pytest.fixture
async def single_sign_on(jwks_url: str) -> AsyncIterator[str]:
    """A codec server taking the identity provider's tokens, and the static token for the CLI."""
    runner, url = await start(BearerAuth("cli-s3cret", JwtValidator(jwks_url, AUDIENCE, ISSUER)))
    yield url
    await runner.cleanup()


@pytest.fixture
async def local() -> AsyncIterator[str]:
    runner, url = await start(None)
    yield url
    await runner.cleanup()


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "lead@example.com", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300, **overrides}


def signed(key: rsa.RSAPrivateKey, kid: str = KID, **overrides: Any) -> str:
    return jwt.encode(claims(**overrides), key, algorithm="RS256", headers={"kid": kid})


def forged(alg: str, secret: bytes) -> str:
    """A token an attacker writes by hand: any header, signed (or not) with what they have."""

    def part(data: dict[str, Any]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=")

    signing_input = part({"alg": alg, "typ": "JWT", "kid": KID}) + b"." + part(claims())
    signature = hmac.new(secret, signing_input, hashlib.sha256).digest() if secret else b""
    return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


async def sealed_body(text: bytes = b'"ann@example.com"') -> str:
    (payload,) = await codec().encode([Payload(metadata={"encoding": b"json/plain"}, data=text)])
    return json.dumps({"payloads": [json.loads(json_format.MessageToJson(payload))]})


async def post(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/decode", data=await sealed_body(), headers=headers) as response,
    ):
        return response.status, await response.json(), dict(response.headers)


def decoded(body: dict[str, Any]) -> bytes:
    return base64.b64decode(body["payloads"][0]["data"])


async def test_the_web_uis_access_token_from_the_identity_provider_opens_the_payloads(
    single_sign_on: str, signing_key: rsa.RSAPrivateKey
) -> None:
    headers = {"Authorization": f"Bearer {signed(signing_key)}", "Origin": UI, "X-Namespace": "support"}
    with structlog.testing.capture_logs() as logs:
        status, body, response_headers = await post(single_sign_on, headers)

    assert status == 200
    assert decoded(body) == b'"ann@example.com"'
    assert response_headers["Access-Control-Allow-Origin"] == UI
    served = [log for log in logs if log["event"] == "codec server served"]
    assert [(log["who"], log["namespace"], log["count"]) for log in served] == [("lead@example.com", "support", 1)]


async def test_tokens_not_issued_by_the_identity_provider_for_this_server_are_refused_saying_why(
    single_sign_on: str, signing_key: rsa.RSAPrivateKey, stranger_key: rsa.RSAPrivateKey
) -> None:
    public_pem = signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    cases = {
        "expired": signed(signing_key, exp=int(time.time()) - 60),
        "another audience": signed(signing_key, aud="another-app"),
        "another issuer": signed(signing_key, iss="https://evil.example.test/"),
        "another key under the provider's key id": signed(stranger_key),
        "a key the provider does not publish": signed(stranger_key, kid="stranger"),
        "alg none": forged("none", b""),
        "the public key as an HMAC secret": forged("HS256", public_pem),
        "no expiry": jwt.encode(
            {k: v for k, v in claims().items() if k != "exp"}, signing_key, algorithm="RS256", headers={"kid": KID}
        ),
        "not a JWT": "not-the-cli-token",
    }
    answers = {}
    for case, token in cases.items():
        status, body, headers = await post(single_sign_on, {"Authorization": f"Bearer {token}"})
        assert headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
        answers[case] = (status, body["error"])
    for case, headers in (("no token", {}), ("a token without 'Bearer'", {"Authorization": signed(signing_key)})):
        status, body, _ = await post(single_sign_on, headers)
        answers[case] = (status, body["error"].split(":")[0])

    assert answers == {
        "expired": (401, "the access token has expired: sign in again"),
        "another audience": (401, "the access token is for another audience than this codec server's"),
        "another issuer": (401, "the access token was issued by another identity provider than the configured one"),
        "another key under the provider's key id": (401, "the access token's signature does not verify"),
        "a key the provider does not publish": (
            401,
            "the access token is signed by a key the identity provider does not publish",
        ),
        "alg none": (401, "the access token's algorithm 'none' is not allowed (allowed: RS256)"),
        "the public key as an HMAC secret": (
            401,
            "the access token's algorithm 'HS256' is not allowed (allowed: RS256)",
        ),
        "no expiry": (401, 'the access token is incomplete: Token is missing the "exp" claim'),
        "not a JWT": (401, "the bearer token is neither this codec server's token nor a JWT"),
        "no token": (401, "a bearer token is required"),
        "a token without 'Bearer'": (401, "a bearer token is required"),
    }


async def test_the_static_token_still_opens_for_the_temporal_cli_beside_single_sign_on(single_sign_on: str) -> None:
    status, body, _ = await post(single_sign_on, {"Authorization": "Bearer cli-s3cret"})
    assert (status, decoded(body)) == (200, b'"ann@example.com"')


async def test_when_the_identity_providers_keys_cannot_be_fetched_the_codec_server_says_so_with_503(
    signing_key: rsa.RSAPrivateKey,
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/.well-known/jwks.json"  # nothing listens there
    runner, url = await start(BearerAuth(validator=JwtValidator(nowhere, AUDIENCE, ISSUER)))
    try:
        status, body, _ = await post(url, {"Authorization": f"Bearer {signed(signing_key)}"})
    finally:
        await runner.cleanup()
    assert status == 503
    assert body["error"].startswith("cannot fetch the identity provider's keys")


# --- local mode -------------------------------------------------------------------------------------------


async def test_in_local_mode_the_web_ui_decodes_without_a_token_and_without_credentials(local: str) -> None:
    """What the dev server's Web UI sends: Content-Type and X-Namespace, no Authorization, no cookies."""
    status, body, headers = await post(local, {"Origin": UI, "X-Namespace": "default"})
    assert (status, decoded(body)) == (200, b'"ann@example.com"')
    assert headers["Access-Control-Allow-Origin"] == UI
    assert "Access-Control-Allow-Credentials" not in headers

    async with aiohttp.ClientSession() as http:
        preflight = {"Origin": UI, "Access-Control-Request-Method": "POST"}
        async with http.options(f"{local}/decode", headers=preflight) as response:
            assert response.status == 204
            assert "X-Namespace" in response.headers["Access-Control-Allow-Headers"]


async def test_in_local_mode_a_page_from_another_origin_or_a_rebound_host_name_is_refused(local: str) -> None:
    """A page on another origin, and one whose host name an attacker re-pointed at 127.0.0.1 (DNS
    rebinding, which makes the request same-origin for the browser), are refused before anything opens."""
    port = local.rsplit(":", 1)[1]
    answers = [
        await post(local, {"Origin": "https://evil.example"}),
        await post(local, {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}),
        await post(local, {"Host": f"evil.example:{port}"}),
    ]
    assert [(status, body["error"]) for status, body, _ in answers] == [
        (403, f"requests from https://evil.example are not served; this codec server answers {UI}"),
        (403, "this codec server serves only loopback host names, not 'evil.example'"),
        (403, "this codec server serves only loopback host names, not 'evil.example'"),
    ]
    assert all("Access-Control-Allow-Origin" not in headers for _, _, headers in answers)


async def test_a_request_larger_than_any_payload_is_refused_unread(local: str) -> None:
    """No payload Temporal holds is above its 4 MiB message limit; a caller cannot make the server hold more."""
    too_large = io.BytesIO(b"{" * (MAX_BODY_BYTES + 1))
    async with aiohttp.ClientSession() as http, http.post(f"{local}/decode", data=too_large) as r:
        assert r.status == 413
        assert (await r.json())["error"].startswith("cannot decode: a request of more than")


async def test_local_mode_refuses_to_listen_beyond_the_loopback() -> None:
    for host in ("0.0.0.0", "::", ""):
        with pytest.raises(UnsafeBindError, match="without authentication: anyone who can reach it"):
            await serve(codec(), None, UI, host, free_port())


async def test_agent_worker_codec_server_without_authentication_refuses_a_non_loopback_address(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CODEC_SERVER_")}
    env["AGENT_CODEC_KEYS"] = json.dumps({"2026-11": base64.b64encode(KEY).decode()})
    process = await asyncio.create_subprocess_exec(
        binary("agent-worker"),
        "codec-server",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    _, err = await process.communicate()
    assert process.returncode == 1
    assert "refusing to serve decrypted payloads on 0.0.0.0 without authentication" in err.decode()
    assert "AGENT_CODEC_SERVER_JWKS_URL" in err.decode()


def test_the_codec_servers_jwt_settings_go_together_and_allow_only_asymmetric_algorithms() -> None:
    with pytest.raises(ValidationError, match="set AGENT_CODEC_SERVER_AUDIENCE and AGENT_CODEC_SERVER_ISSUER too"):
        CodecServerSettings(jwks_url="https://login.example.test/jwks.json")
    for algorithms in (["none"], ["HS256"], ["RS256", "HS256"], []):
        with pytest.raises(ValidationError, match="only asymmetric algorithms"):
            CodecServerSettings(algorithms=algorithms)
    configured = wiring.codec_server_auth(
        Settings(
            codec_server=CodecServerSettings(
                jwks_url="https://login.example.test/jwks.json", audience=AUDIENCE, issuer=ISSUER
            )
        )
    )
    assert configured is not None
    assert configured.token is None
    assert configured.validator is not None
    assert wiring.codec_server_auth(Settings()) is None  # local mode


async def test_agent_worker_dev_with_codec_keys_points_its_web_ui_at_a_local_codec_server(tmp_path: Path) -> None:
    """``agent-worker dev`` with encryption on: its Web UI's codec endpoint is a codec server in local mode."""
    port, ui_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CODEC")}
    env["AGENT_CODEC_KEYS"] = json.dumps({"2026-11": base64.b64encode(KEY).decode()})
    async with agent_worker_dev(tmp_path, port, ui_port, env) as said:
        banner = next(line for line in said if line.startswith("Temporal dev server on"))  # the worker may log after
        codec_url = banner.split("decrypting through the codec server on ")[1].split(";")[0]
        await listening("127.0.0.1", ui_port)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{ui_port}/api/v1/settings") as response:
                ui_settings = await response.json()
            ui = f"http://localhost:{ui_port}"
            async with http.post(f"{codec_url}/decode", data=await sealed_body(), headers={"Origin": ui}) as r:
                status, body = r.status, await r.json()

    assert ui_settings["Codec"]["Endpoint"] == codec_url
    assert codec_url.startswith("http://127.0.0.1:")
    assert (status, decoded(body)) == (200, b'"ann@example.com"')
