"""The approval inbox's authentication as pure logic: password hashes, session cookies, CSRF tokens, the proxy's
header and the origin check, each tried the way someone who wants to answer in another's name would."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agent_worker.config import Settings
from agent_worker.inbox.auth import Authenticator, Keys, check_hash, hash_password, password_matches, same_origin
from agent_worker.inbox.guard import host_name

KEY, OTHER_KEY = b"k" * 32, b"o" * 32
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ANN = hash_password("ann's long password")


def authenticator(*, users: dict[str, str] | None = None, keys: tuple[bytes, ...] = (KEY,)) -> Authenticator:
    return Authenticator(
        Keys(list(keys)), {"ann": ANN} if users is None else users, proxy_header="X-Forwarded-Email",
        trusted_proxies=[ipaddress.ip_network("127.0.0.1/32")],
    )  # fmt: skip


def test_a_password_is_kept_as_a_salted_scrypt_hash_that_only_the_password_matches() -> None:
    again = hash_password("ann's long password")
    assert ANN.startswith("scrypt$32768$8$1$")
    assert "ann's long password" not in ANN
    assert again != ANN  # salted
    assert password_matches(ANN, "ann's long password")
    assert not password_matches(ANN, "ann's long passwore")


@pytest.mark.parametrize(
    "stored",
    ["", "ann's long password", "scrypt$1024$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAA", "bcrypt$12$x", "scrypt$x$8$1$a$b"],
)
def test_a_setting_that_is_not_a_strong_enough_hash_is_refused_at_start(stored: str) -> None:
    with pytest.raises(ValueError, match="password hash"):
        check_hash(stored)
    with pytest.raises(ValidationError, match="ann"):
        Settings(web_users={"ann": stored})


def test_a_session_names_who_signed_in_until_it_expires() -> None:
    auth = authenticator()
    cookie = auth.sign_in("ann", "ann's long password", NOW)
    assert cookie is not None
    person = auth.person("127.0.0.1", {}, cookie, NOW + timedelta(hours=11))
    assert person is not None
    assert (person.name, person.how) == ("ann", "password")
    assert auth.person("127.0.0.1", {}, cookie, NOW + timedelta(hours=12, seconds=1)) is None


def test_a_wrong_password_or_a_name_nobody_has_signs_nobody_in() -> None:
    auth = authenticator()
    assert auth.sign_in("ann", "guess", NOW) is None
    assert auth.sign_in("mallory", "ann's long password", NOW) is None


def test_a_cookie_edited_to_name_someone_else_or_made_with_another_key_is_nobodys() -> None:
    auth = authenticator(users={"ann": ANN, "ben": ANN})
    cookie = auth.sign_in("ann", "ann's long password", NOW)
    assert cookie is not None
    body, mac = cookie.split(".")
    forged = Keys([OTHER_KEY]).issue("ben", ANN, NOW, timedelta(hours=1))
    assert auth.person(None, {}, f"{body[:-2]}xx.{mac}", NOW) is None
    assert auth.person(None, {}, forged, NOW) is None
    assert auth.person(None, {}, cookie.replace(".", ".0"), NOW) is None


def test_a_changed_password_ends_the_sessions_made_with_the_old_one_and_a_rotated_key_does_not() -> None:
    cookie = authenticator().sign_in("ann", "ann's long password", NOW)
    assert cookie is not None
    changed = authenticator(users={"ann": hash_password("a new long password")})
    rotated = authenticator(keys=(KEY, OTHER_KEY))
    removed = authenticator(users={})
    assert changed.person(None, {}, cookie, NOW) is None
    assert removed.person(None, {}, cookie, NOW) is None
    assert rotated.person(None, {}, cookie, NOW) is not None


def test_the_proxys_header_is_believed_only_from_the_proxys_address() -> None:
    auth = authenticator()
    header = {"X-Forwarded-Email": "ann@example.com"}
    from_proxy = auth.person("127.0.0.1", header, None, NOW)
    assert from_proxy is not None
    assert (from_proxy.name, from_proxy.how) == ("ann@example.com", "proxy")
    assert auth.person("192.0.2.7", header, None, NOW) is None
    assert auth.person(None, header, None, NOW) is None
    assert auth.person("127.0.0.1", {"X-Forwarded-Email": "  "}, None, NOW) is None


def test_a_csrf_token_is_its_owners_alone() -> None:
    keys = Keys([KEY])
    token = keys.csrf("session:abc")
    assert keys.csrf_ok("session:abc", token)
    assert not keys.csrf_ok("session:abd", token)
    assert not keys.csrf_ok("proxy:ann", keys.csrf("proxy:ben"))
    assert not Keys([OTHER_KEY]).csrf_ok("session:abc", token)
    assert not keys.csrf_ok("session:abc", "")


@pytest.mark.parametrize(
    ("origin", "referer", "taken"),
    [
        ("http://127.0.0.1:8088", None, True),
        ("HTTP://127.0.0.1:8088", None, True),
        ("http://127.0.0.1:8089", None, False),  # another port: the same site, another origin
        ("http://localhost:8088", None, False),
        ("null", "http://127.0.0.1:8088/tickets/x", True),
        (None, "http://127.0.0.1:8088/tickets/x", True),
        (None, "http://127.0.0.1:8088.evil.example/", False),
        (None, "https://127.0.0.1:8088/", False),
        (None, None, False),
        ("null", None, False),
    ],
)
def test_a_form_counts_only_from_the_inboxs_own_origin(
    origin: str | None,
    referer: str | None,
    taken: bool,  # noqa: FBT001 - a parameter of the test table
) -> None:
    assert same_origin(origin, referer, "http://127.0.0.1:8088") is taken


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8088", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]:8088", "::1"),
        ("evil.example:8088", "evil.example"),
        ("evil.example/", None),
        ("127.0.0.1:port", None),
        ("ann@127.0.0.1", None),
        ("", None),
    ],
)
def test_a_host_header_is_read_as_a_name_or_refused(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_the_proxys_header_is_not_configurable_without_its_addresses_and_the_inboxs_public_address() -> None:
    with pytest.raises(ValidationError, match="AGENT_WEB_TRUSTED_PROXIES"):
        Settings(web_proxy_header="X-Forwarded-Email")
    with pytest.raises(ValidationError, match="AGENT_WEB_PUBLIC_URL"):
        Settings(web_proxy_header="X-Forwarded-Email", web_trusted_proxies=["127.0.0.1"])
    settings = Settings(
        web_proxy_header="X-Forwarded-Email", web_trusted_proxies=["10.0.0.0/24"],
        web_public_url="https://inbox.example.com", web_base_path="/inbox/",
    )  # fmt: skip
    assert settings.web_base_path == "/inbox"
