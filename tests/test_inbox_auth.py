"""The approval inbox's authentication as logic over a real business database (SQLite and PostgreSQL): password
hashes, sessions the server keeps, the sign-in throttle, CSRF tokens, the proxy's header and the origin check,
each tried the way someone who wants to answer in another's name would. The database's clock is turned, never
waited for."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from activities.business.database import Database
from activities.business.schema import inbox_sessions, inbox_sign_in_failures
from agent_worker.config import Settings
from agent_worker.config.web import WebSettings
from agent_worker.inbox import auth as auth_module
from agent_worker.inbox.auth import (
    DEVICE_LIFETIME,
    Authenticator,
    Keys,
    SignedIn,
    Throttled,
    WrongPassword,
    same_origin,
)
from agent_worker.inbox.guard import host_name
from agent_worker.inbox.sessions import MAX_PER_PERSON, TOUCH_EVERY, Sessions, token_hash
from agent_worker.inbox.throttle import Attempt, Throttle, network
from agent_worker.passwords import check_hash, hash_password, password_matches
from tests.support.inbox import Clock
from tests.support.processes import AGENT_WORKER
from tests.support.stores import StoreFactory

KEY, OTHER_KEY = b"k" * 32, b"o" * 32
PASSWORD = "ann's long password"
ANN = hash_password(PASSWORD)
SCRYPT_ANN = "scrypt$32768$8$1$oGmCu1tfW1xw3LWBni4A6Q==$+FZLenvkq5MhhNNwk/RgCsmcs1tAjxy5oXnBnMr3+AY="
"""Ann's password as an unreleased version hashed it (scrypt, N=2^15), the right password behind it: refused all
the same."""
MAX_AGE, IDLE = timedelta(hours=12), timedelta(minutes=30)
HERE = "192.0.2.7"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def database(make_store: StoreFactory, clock: Clock) -> Database:
    """The business database, migrated, on each backend, with a clock the test turns."""
    return make_store(clock=clock).database


def authenticator(
    database: Database,
    *,
    users: dict[str, str] | None = None,
    keys: tuple[bytes, ...] = (KEY,),
    throttle: Throttle | None = None,
) -> Authenticator:
    """An inbox process's authenticator over ``database``: each call is another process, sharing only the database."""
    return Authenticator(
        Keys(list(keys)),
        {"ann": ANN} if users is None else users,
        Sessions(database, max_age=MAX_AGE, idle=IDLE),
        throttle or Throttle(database),
        proxy_header="X-Forwarded-Email",
        trusted_proxies=[ipaddress.ip_network("127.0.0.1/32")],
    )


def signed_in(auth: Authenticator, name: str = "ann", password: str = PASSWORD, address: str = HERE) -> str:
    result = auth.sign_in(name, password, address=address, user_agent="Chromium")
    assert isinstance(result, SignedIn), result
    return result.token


def test_a_new_password_is_kept_as_a_salted_argon2id_hash_that_only_the_password_matches() -> None:
    again = hash_password(PASSWORD)
    assert ANN.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert PASSWORD not in ANN
    assert again != ANN  # salted
    assert check_hash(ANN) == ANN
    assert password_matches(ANN, PASSWORD)
    assert not password_matches(ANN, "ann's long passwore")


def test_an_operator_who_kept_a_scrypt_hash_is_stopped_at_start_and_told_to_make_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hash holds the right password, so accepting it would work today: it is refused anyway, with the command
    that makes its replacement, and no sign-in checks a password against it."""
    monkeypatch.setenv("AGENT_WEB_USERS", json.dumps({"ann": SCRYPT_ANN}))
    with pytest.raises(ValidationError, match=r"ann: a scrypt password hash.*`agent-worker web-user NAME`"):
        Settings()
    with pytest.raises(ValueError, match="scrypt"):
        password_matches(SCRYPT_ANN, PASSWORD)
    inbox = subprocess.run(
        [AGENT_WORKER, "web"],
        env={**os.environ, "AGENT_WEB_USERS": json.dumps({"ann": SCRYPT_ANN})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert inbox.returncode == 2, inbox.stderr
    assert "ann: a scrypt password hash" in inbox.stderr
    assert "agent-worker web-user NAME" in inbox.stderr
    assert SCRYPT_ANN not in inbox.stderr


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "ann's long password",
        "scrypt$1024$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAA",
        "bcrypt$12$x",
        "scrypt$x$8$1$a$b",
        "$argon2id$garbage",
        "$argon2id$v=19$m=65536,t=3,p=4$ajgkN6KydtT3fYfD4iN4rw$",  # no digest
        "$argon2id$v=19$m=65536,t=3,p=4$!!!$DpxfRGiCn+c8THEWv8DdaS1FaOdssp6Rlf+p5E+gwg0",  # a salt that is not base64
        "$argon2id$v=19$m=1024,t=1,p=1$ajgkN6KydtT3fYfD4iN4rw$DpxfRGiCn+c8THEWv8DdaS1FaOdssp6Rlf+p5E+gwg0",  # weak
        "$argon2id$v=19$m=65536,t=1,p=4$ajgkN6KydtT3fYfD4iN4rw$DpxfRGiCn+c8THEWv8DdaS1FaOdssp6Rlf+p5E+gwg0",  # 1 pass
        "$argon2i$v=19$m=65536,t=3,p=4$ajgkN6KydtT3fYfD4iN4rw$DpxfRGiCn+c8THEWv8DdaS1FaOdssp6Rlf+p5E+gwg0",  # not id
        "$argon2id$v=16$m=65536,t=3,p=4$ajgkN6KydtT3fYfD4iN4rw$DpxfRGiCn+c8THEWv8DdaS1FaOdssp6Rlf+p5E+gwg0",  # 1.0
    ],
)
def test_a_setting_that_is_not_a_strong_enough_hash_is_refused_at_start(stored: str) -> None:
    with pytest.raises(ValueError, match="password hash"):
        check_hash(stored)
    with pytest.raises(ValidationError, match="ann"):
        Settings(web=WebSettings(users={"ann": stored}))


# --- sessions ------------------------------------------------------------------------------------------------


def test_a_session_names_who_signed_in_until_its_maximum_age_however_busy(database: Database, clock: Clock) -> None:
    auth = authenticator(database)
    token = signed_in(auth)
    person = auth.person("127.0.0.1", {}, token)
    assert person is not None
    assert (person.name, person.how) == ("ann", "password")
    while clock.now < Clock().now + MAX_AGE - timedelta(minutes=10):
        clock.turn(timedelta(minutes=10))  # busy: a request every ten minutes, never idle
        assert auth.person(None, {}, token) is not None
    clock.turn(timedelta(minutes=10))
    assert auth.person(None, {}, token) is None
    assert auth.sessions.count() == 0  # ended, and its row deleted


def test_a_session_ends_after_its_idle_time_and_last_seen_is_written_at_most_once_a_minute(
    database: Database, clock: Clock
) -> None:
    auth = authenticator(database)
    token = signed_in(auth)

    def last_seen() -> Any:
        with database.reader.connect() as db:
            return db.execute(sa.select(inbox_sessions.c.last_seen_at)).scalar_one()

    first = last_seen()
    for _ in range(5):
        clock.turn(TOUCH_EVERY / 10)
        assert auth.person(None, {}, token) is not None
    assert last_seen() == first  # requests within a minute write nothing
    clock.turn(TOUCH_EVERY)
    assert auth.person(None, {}, token) is not None
    assert last_seen() != first

    clock.turn(IDLE - timedelta(seconds=1))
    assert auth.person(None, {}, token) is not None  # idle, but not for long enough
    clock.turn(IDLE)
    assert auth.person(None, {}, token) is None
    clock.turn(-IDLE)
    assert auth.person(None, {}, token) is None  # ended for good, not merely asleep


def test_a_page_refreshing_itself_keeps_no_one_signed_in(database: Database, clock: Clock) -> None:
    auth = authenticator(database)
    token = signed_in(auth)
    for _ in range(int(IDLE / TOUCH_EVERY) - 1):
        clock.turn(TOUCH_EVERY)
        assert auth.person(None, {}, token, active=False) is not None
    clock.turn(TOUCH_EVERY)
    assert auth.person(None, {}, token, active=False) is None


def test_signing_out_ends_the_session_on_the_server_so_a_copy_of_its_token_is_nobodys(database: Database) -> None:
    auth = authenticator(database)
    token, other = signed_in(auth), signed_in(auth)
    copy = str(token)
    auth.sign_out(token)
    assert auth.person(None, {}, copy) is None
    assert auth.person(None, {}, other) is not None  # ann's other browser stays signed in


def test_the_database_keeps_a_hash_of_the_token_and_a_made_up_or_edited_token_is_nobodys(database: Database) -> None:
    auth = authenticator(database)
    token = signed_in(auth)
    with database.reader.connect() as db:
        (row,) = db.execute(sa.select(inbox_sessions)).all()
    assert token not in [str(value) for value in row]
    assert row.token_hash == token_hash(token)
    assert auth.person(None, {}, row.token_hash) is None  # what a copy of the database holds signs nobody in
    assert auth.person(None, {}, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert auth.person(None, {}, "") is None
    assert auth.person(None, {}, None) is None
    assert authenticator(database, keys=(OTHER_KEY,)).person(None, {}, token) is None  # another desk's inbox


def test_a_changed_password_ends_the_sessions_made_with_the_old_one_and_a_rotated_key_does_not(
    database: Database,
) -> None:
    token = signed_in(authenticator(database))
    rotated = authenticator(database, keys=(KEY, OTHER_KEY))
    assert rotated.person(None, {}, token) is not None
    changed = authenticator(database, users={"ann": hash_password("a new long password")})
    assert changed.person(None, {}, token) is None
    assert authenticator(database).person(None, {}, token) is None  # ended on the server, not merely refused
    token = signed_in(authenticator(database))
    assert authenticator(database, users={"ben": ANN}).person(None, {}, token) is None  # ann removed


def test_every_inbox_process_on_the_database_sees_the_same_sessions(database: Database, clock: Clock) -> None:
    """Two processes behind a load balancer: a sign-in on one is known to the other, a sign-out on the other ends it
    on the first."""
    one = authenticator(database)
    other = authenticator(Database(database.url, clock=clock))
    token = signed_in(one)
    assert other.person(None, {}, token) is not None
    other.sign_out(token)
    assert one.person(None, {}, token) is None
    other.sessions.database.close()


def test_an_operator_ends_all_of_a_persons_sessions_and_no_one_elses(database: Database) -> None:
    auth = authenticator(database, users={"ann": ANN, "ben": ANN})
    anns = [signed_in(auth) for _ in range(3)]
    bens = signed_in(auth, "ben")
    assert [session.person for session in auth.sessions.live()] == ["ann", "ann", "ann", "ben"]
    assert auth.sessions.end_all("ann") == 3
    assert all(auth.person(None, {}, token) is None for token in anns)
    assert auth.person(None, {}, bens) is not None


def test_expired_sessions_are_deleted_and_a_person_keeps_at_most_so_many(database: Database, clock: Clock) -> None:
    sessions = Sessions(database, max_age=MAX_AGE, idle=IDLE)
    first = sessions.start("ann", "c", address=None, user_agent=None)
    for _ in range(MAX_PER_PERSON):
        clock.turn(timedelta(seconds=1))
        sessions.start("ann", "c", address=None, user_agent="x" * 10_000)
    assert sessions.count() == MAX_PER_PERSON
    assert sessions.find(first) is None  # the least recently used went
    assert all(len(session.user_agent or "") <= 200 for session in sessions.live())
    sessions.start("ben", "c", address=None, user_agent=None)
    clock.turn(IDLE)
    sessions.start("cleo", "c", address=None, user_agent=None)
    assert sessions.count() == 1  # every expired row went with the next sign-in
    clock.turn(IDLE)
    assert sessions.purge() == 1
    assert sessions.count() == 0


# --- the sign-in throttle --------------------------------------------------------------------------------------


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The passwords the authenticator checked against a hash, in order."""
    seen: list[str] = []
    real = password_matches

    def counting(stored: str, password: str) -> bool:
        seen.append(password)
        return real(stored, password)

    monkeypatch.setattr(auth_module, "password_matches", counting)
    return seen


def test_beyond_the_limit_a_wrong_password_is_not_even_checked_and_the_right_one_is_refused_too(
    database: Database, clock: Clock, checked: list[str]
) -> None:
    auth = authenticator(database, throttle=Throttle(database, person_limit=3, window=timedelta(minutes=15)))
    for guess in ("guess 1", "guess 2", "guess 3"):
        assert isinstance(auth.sign_in("ann", guess, address=HERE, user_agent=None), WrongPassword)
        clock.turn(timedelta(minutes=1))
    refused = auth.sign_in("ann", PASSWORD, address="198.51.100.1", user_agent=None)  # another address too
    assert refused == Throttled("person", timedelta(minutes=12))
    assert refused.wait() == "12 min"
    assert refused.seconds == 720
    assert checked == ["guess 1", "guess 2", "guess 3"]  # the throttled attempt checked nothing
    clock.turn(timedelta(minutes=12))  # the first guess leaves the window
    assert isinstance(auth.sign_in("ann", PASSWORD, address=HERE, user_agent=None), SignedIn)


def test_a_name_nobody_has_is_throttled_exactly_like_a_real_one(database: Database, checked: list[str]) -> None:
    auth = authenticator(database, throttle=Throttle(database, person_limit=2))
    answers: dict[str, list[type]] = {}
    for name in ("ann", "mallory"):
        answers[name] = [
            type(auth.sign_in(name, "guess", address=f"192.0.2.{len(answers)}", user_agent=None)) for _ in range(3)
        ]
    assert answers["ann"] == answers["mallory"] == [WrongPassword, WrongPassword, Throttled]
    assert len(checked) == 4  # a name nobody has costs a hash too, so it takes as long to refuse


def test_an_address_is_throttled_across_every_name_it_tries_and_an_ipv6_address_by_its_64(database: Database) -> None:
    auth = authenticator(database, throttle=Throttle(database, person_limit=100, address_limit=3))
    names = ["ann", "ben", "cleo"]
    assert all(
        isinstance(auth.sign_in(name, "guess", address="2001:db8::1", user_agent=None), WrongPassword) for name in names
    )
    refused = auth.sign_in("dora", "guess", address="2001:db8::ffff", user_agent=None)
    assert isinstance(refused, Throttled)
    assert refused.who == "address"
    assert isinstance(auth.sign_in("ann", PASSWORD, address="2001:db8:0:1::1", user_agent=None), SignedIn)
    assert network("::ffff:192.0.2.7") == "192.0.2.7"
    assert network("not an address") == network(None) == "unknown"


def test_a_right_password_clears_the_persons_count_and_takes_back_only_its_own_from_the_address(
    database: Database,
) -> None:
    throttle = Throttle(database, person_limit=3, address_limit=3)
    for _ in range(2):
        assert isinstance(throttle.attempt("ann", HERE), Attempt)
    right = throttle.attempt("ann", HERE)
    assert isinstance(right, Attempt)
    throttle.succeeded(right)
    assert isinstance(throttle.attempt("ann", "198.51.100.1"), Attempt)  # ann's count started afresh
    assert isinstance(throttle.attempt("ben", HERE), Attempt)  # the address held its two wrong ones, and this
    assert isinstance(throttle.attempt("ben", HERE), Throttled)  # so the third is its last


def test_concurrent_guesses_from_several_processes_check_no_more_than_the_limit(
    database: Database, clock: Clock
) -> None:
    """Each thread is another inbox process with its own connection pool: the count is read and written in one
    transaction, so they cannot all slip under it."""
    processes = [Database(database.url, clock=clock) for _ in range(8)]
    results: list[Attempt | Throttled] = []
    start = threading.Barrier(len(processes))

    def guess(process: Database, address: str) -> None:
        start.wait()
        results.extend(Throttle(process, person_limit=5).attempt("ann", address) for _ in range(3))

    threads = [threading.Thread(target=guess, args=(process, f"192.0.2.{n}")) for n, process in enumerate(processes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for process in processes:
        process.close()
    assert len(results) == 24
    assert sum(isinstance(result, Attempt) for result in results) == 5


STEPS = st.lists(
    st.tuples(
        st.integers(0, 4 * 60),  # seconds later
        st.sampled_from(["ann", "ben", "mallory", "x", "y", "z"]),  # who is tried: real names and made-up ones
        st.sampled_from(["192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8:1::1"]),
        st.booleans(),  # the right password (only ann and ben have one)
    ),
    max_size=60,
)


@pytest.mark.parametrize("make_store", ["sqlite"], indirect=True)
def test_whatever_the_attempts_no_key_has_more_wrong_passwords_checked_in_a_window_than_its_limit_nor_the_table_more_rows_than_its_buckets(  # noqa: E501
    database: Database, clock: Clock
) -> None:
    """The throttle's bound, stated again from its docstring and checked over any sequence of attempts: in any
    span of the window, at most ``limit`` wrong passwords are checked for an address, and for a person between two
    of their sign-ins; a throttled attempt checks nothing; the table never holds more than a row per bucket."""
    window, limits = timedelta(minutes=15), {"person": 3, "address": 5}
    throttle = Throttle(database, person_limit=3, address_limit=5, window=window, buckets=4)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=STEPS)
    def holds(steps: list[tuple[int, str, str, bool]]) -> None:
        clock.turn(2 * window)  # nothing from an earlier example is still counted
        wrong: dict[str, list[Any]] = {}
        for seconds, name, address, right in steps:
            clock.turn(timedelta(seconds=seconds))
            attempt = throttle.attempt(name, address)
            assert throttle.rows() <= 2 * 4
            if isinstance(attempt, Throttled):
                assert timedelta(0) < attempt.retry_after <= window
                continue
            assert attempt.address is not None  # no known device here: counted by name and by address
            keys = {"person": attempt.person, "address": attempt.address}
            if right and name in {"ann", "ben"}:
                throttle.succeeded(attempt)
                wrong[attempt.person] = []  # a sign-in starts the person's count afresh
                continue
            for who, key in keys.items():
                wrong.setdefault(key, []).append(clock.now)
                in_window = [at for at in wrong[key] if at > clock.now - window]
                assert len(in_window) <= limits[who], (who, key, in_window)

    holds()


def test_a_throttled_answer_over_every_backend_reads_as_the_desk_says_it(database: Database) -> None:
    throttle = Throttle(database, person_limit=1, window=timedelta(minutes=4))
    assert isinstance(throttle.attempt("ann", HERE), Attempt)
    refused = throttle.attempt("ann", HERE)
    assert isinstance(refused, Throttled)
    assert (refused.who, refused.wait(), refused.seconds) == ("person", "4 min", 240)
    with database.reader.connect() as db:
        keys = db.execute(sa.select(inbox_sign_in_failures.c.key)).scalars().all()
    assert sorted(keys) == sorted([throttle.key("person", "ann"), throttle.key("address", HERE)])
    assert not any("ann" in key or HERE in key for key in keys)  # neither a name nor an address is kept


def device_of(result: object) -> str:
    assert isinstance(result, SignedIn), result
    assert result.device
    return result.device


def test_someone_elses_guesses_on_a_name_lock_its_person_out_of_no_browser_they_signed_in_on_and_a_new_one_stays_throttled(  # noqa: E501
    database: Database, clock: Clock
) -> None:
    users = {"ann": ANN, "ben": hash_password("ben's long password")}
    auth = authenticator(database, users=users, throttle=Throttle(database, person_limit=3, address_limit=5))
    anns = device_of(auth.sign_in("ann", PASSWORD, address=HERE, user_agent="Chromium"))  # her desk's browser
    bens = device_of(auth.sign_in("ben", "ben's long password", address=HERE, user_agent="Chromium"))
    guesser = "198.51.100.9"
    for guess in ("guess 1", "guess 2", "guess 3"):  # the guesser fills ann's count
        assert isinstance(auth.sign_in("ann", guess, address=guesser, user_agent=None), WrongPassword)
    for name in ("cleo", "dora"):  # and his address's
        assert isinstance(auth.sign_in(name, "guess", address=guesser, user_agent=None), WrongPassword)
    device_id, made, mac = anns.split(".")
    borrowed = [
        None,  # a new browser
        bens,  # a cookie made for someone else
        f"{device_id}.{int(made) + 1}.{mac}",  # an edited one
        f"forged.{made}.{'0' * 64}",  # a made-up one
        anns + ".x",  # with something after it
    ]
    for cookie in borrowed:
        refused = auth.sign_in("ann", PASSWORD, address="203.0.113.5", user_agent=None, device=cookie)
        assert isinstance(refused, Throttled), (cookie, refused)
        assert refused.who == "person", cookie

    # ann, from the browser she signed in on, from anywhere, the guesser's address too: her own count alone
    assert isinstance(auth.sign_in("ann", PASSWORD, address=guesser, user_agent="Chromium", device=anns), SignedIn)
    assert isinstance(auth.sign_in("dora", "guess", address=guesser, user_agent=None), Throttled)  # he still is
    assert isinstance(auth.sign_in("ann", "guess 4", address=guesser, user_agent=None), Throttled)

    # a stolen device cookie gives its thief the person's limit of guesses a window, no more
    for guess in ("stolen 1", "stolen 2", "stolen 3"):
        assert isinstance(auth.sign_in("ann", guess, address=guesser, user_agent=None, device=anns), WrongPassword)
    assert isinstance(auth.sign_in("ann", PASSWORD, address=HERE, user_agent=None, device=anns), Throttled)

    # a device is known for DEVICE_LIFETIME after its last sign-in there, then is a new browser again
    clock.turn(DEVICE_LIFETIME + timedelta(minutes=1))
    renewed = device_of(auth.sign_in("ann", PASSWORD, address=HERE, user_agent=None, device=bens))
    assert auth.keys.known_device("ann", anns, clock.now) is None
    assert auth.keys.known_device("ann", renewed, clock.now) is not None


# --- the proxy, CSRF, origins ----------------------------------------------------------------------------------


def test_the_proxys_header_is_believed_only_from_the_proxys_address(database: Database) -> None:
    auth = authenticator(database)
    header = {"X-Forwarded-Email": "ann@example.com"}
    from_proxy = auth.person("127.0.0.1", header, None)
    assert from_proxy is not None
    assert (from_proxy.name, from_proxy.how) == ("ann@example.com", "proxy")
    assert auth.person("192.0.2.7", header, None) is None
    assert auth.person(None, header, None) is None
    assert auth.person("127.0.0.1", {"X-Forwarded-Email": "  "}, None) is None


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
        WebSettings(proxy_header="X-Forwarded-Email")
    with pytest.raises(ValidationError, match="AGENT_WEB_PUBLIC_URL"):
        WebSettings(proxy_header="X-Forwarded-Email", trusted_proxies=["127.0.0.1"])
    web = WebSettings(
        proxy_header="X-Forwarded-Email",
        trusted_proxies=["10.0.0.0/24"],
        public_url="https://inbox.example.com",
        base_path="/inbox/",
    )
    assert web.base_path == "/inbox"
