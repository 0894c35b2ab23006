"""ADDJOB option parsing (disque_server/commands/addjob.py), in-process, against
Disque 1.0-rc1's addjobCommand: the options in any order and case, the last of a
repeated one wins, the first bad one is the error, and the checks between them.

The parser answers errors through its client: a real one with no connection,
whose replies stay in its output list."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import new_client, new_server, replies

from disque_server.commands.addjob import (
    DEFAULT_RETRY_MAX,
    DEFAULT_TTL,
    AddjobOptions,
    addjob_command,
    check_options,
    default_retry,
    parse_options,
)

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

SYNTAX = b"-ERR syntax error\r\n"
REPLICATE = b"-ERR REPLICATE must be between 1 and 65535\r\n"
TTL = b"-ERR TTL must be a number > 0\r\n"
RETRY = b"-ERR RETRY time must be a non negative number\r\n"
DELAY = b"-ERR DELAY time must be a non negative number\r\n"
MAXLEN = b"-ERR MAXLEN must be a positive number\r\n"
REPLICATE_WITH_RETRY_0 = (
    b"-ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)\r\n"
)
DELAY_OVER_TTL = (
    b"-ERR The specified DELAY is greater than TTL. Job refused since would never be delivered\r\n"
)


def parse(*options: str, replicate: int = 1) -> tuple[AddjobOptions | None, list[bytes]]:
    """ADDJOB q body 0 <options>: the options once parsed and checked, or None,
    and what was replied."""
    client = new_client()
    opts = AddjobOptions(replicate)
    argv = [b"ADDJOB", b"q", b"body", b"0", *(o.encode() for o in options)]
    ok = parse_options(client, argv, opts) and check_options(client, opts)
    sent = replies(client)
    assert ok == (not sent)
    return (opts if ok else None), sent


OPTION_FIELDS = ("replicate", "ttl", "retry", "delay", "maxlen", "asynchronous")


def fields(opts: AddjobOptions) -> dict[str, object]:
    return {name: getattr(opts, name) for name in OPTION_FIELDS}


def test_no_options() -> None:
    opts, _ = parse(replicate=3)
    assert fields(opts) == {
        "replicate": 3,
        "ttl": DEFAULT_TTL,
        "retry": 300,
        "delay": 0,
        "maxlen": 0,
        "asynchronous": False,
    }


def test_every_option() -> None:
    opts, _ = parse(
        "replicate", "2", "Delay", "5", "RETRY", "60", "ttl", "3600", "MaxLen", "10", "async"
    )
    assert fields(opts) == {
        "replicate": 2,
        "ttl": 3600,
        "retry": 60,
        "delay": 5,
        "maxlen": 10,
        "asynchronous": True,
    }


def test_the_last_of_a_repeated_option_wins() -> None:
    opts, _ = parse("TTL", "100", "TTL", "200", "ASYNC", "ASYNC")
    assert opts.ttl == 200 and opts.asynchronous


numeric = {
    "REPLICATE": st.integers(1, 65535),
    "TTL": st.integers(1, 2**40),
    "RETRY": st.integers(0, 2**40),
    "DELAY": st.integers(0, 2**40),
    "MAXLEN": st.integers(1, 2**40),
}


@RELAXED
@given(data=st.data())
def test_any_valid_options_in_any_order_and_case(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from([*numeric, "ASYNC"]), unique=True))
    words, expected = [], {}
    for name in data.draw(st.permutations(chosen)):
        spelled = "".join(data.draw(st.sampled_from([c.lower(), c])) for c in name)
        if name == "ASYNC":
            words.append(spelled)
            expected["asynchronous"] = True
        else:
            value = data.draw(numeric[name])
            words += [spelled, str(value)]
            expected[name.lower()] = value
    client, opts = new_client(), AddjobOptions(1)
    assert parse_options(client, [b"ADDJOB", b"q", b"body", b"0", *map(str.encode, words)], opts)
    assert replies(client) == []
    for name, value in expected.items():
        assert getattr(opts, name) == value


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (("REPLICATE", "0"), REPLICATE),
        (("REPLICATE", "65536"), REPLICATE),
        (("REPLICATE", "x"), REPLICATE),
        (("TTL", "0"), TTL),
        (("TTL", "-1"), TTL),
        (("TTL", "1.5"), TTL),
        (("RETRY", "-1"), RETRY),
        (("DELAY", "-1"), DELAY),
        (("MAXLEN", "0"), MAXLEN),
        (("TTL", "9223372036854775808"), TTL),  # over a long long
        (("TTL", " 60"), TTL),  # strtoll skips a blank, Disque does not
        (("TTL", "60 "), TTL),
        (("TTL", "1_0"), TTL),  # int() takes it and the two above
        (("TTL", "+"), TTL),  # a sign with no digits
        (("TTL", "\u0661"), TTL),  # a digit, but not an ASCII one
        (("TTL", "0x10"), TTL),
        (("TTL",), SYNTAX),  # an option with no value
        (("ASYNC", "TTL"), SYNTAX),
        (("ASYNC", "10"), SYNTAX),  # ASYNC takes no value
        (("NOSUCH", "1"), SYNTAX),
        (("TTL", "0", "REPLICATE", "0"), TTL),  # the first bad one is the error
        (("BAD", "TTL", "0"), SYNTAX),
        (("REPLICATE", "2", "RETRY", "0"), REPLICATE_WITH_RETRY_0),
        (("DELAY", "10", "TTL", "10"), DELAY_OVER_TTL),
        (("DELAY", "86400"), DELAY_OVER_TTL),  # the default TTL, one day
    ],
)
def test_refused(options: tuple[str, ...], error: bytes) -> None:
    assert parse(*options) == (None, [error])


def test_at_most_once_needs_replicate_1_only_when_more_is_asked() -> None:
    assert parse("RETRY", "0")[0].retry == 0
    assert parse("RETRY", "0", replicate=2)[1] == [REPLICATE_WITH_RETRY_0]  # cluster default
    assert parse("RETRY", "0", "REPLICATE", "1", replicate=3)[0].replicate == 1


@RELAXED
@given(ttl=st.integers(1, 2**40))
def test_default_retry_is_a_tenth_of_the_ttl_between_1_s_and_5_min(ttl: int) -> None:
    opts, _ = parse("TTL", str(ttl))
    assert opts.retry == default_retry(ttl) == min(max(ttl // 10, 1), DEFAULT_RETRY_MAX)


# Disque 1.0-rc1 reads these numbers with strtoll (getLongLongFromObject).
@pytest.mark.parametrize(
    ("options", "field", "value"),
    [
        (("TTL", "+60"), "ttl", 60),
        (("RETRY", ""), "retry", 0),
        (("DELAY", ""), "delay", 0),
        (("MAXLEN", "0000000000000000000000005"), "maxlen", 5),
        (("REPLICATE", "+2"), "replicate", 2),
        (("DELAY", "-0"), "delay", 0),
        (("RETRY", "5\x00x"), "retry", 5),  # a C string ends at its NUL
    ],
)
def test_numbers_as_strtoll_reads_them(options: tuple[str, ...], field: str, value: int) -> None:
    opts, sent = parse(*options)
    assert sent == [] and getattr(opts, field) == value


def test_options_seen_before_answer_as_the_first_time() -> None:
    """ADDJOB keeps options it parsed and checked, by their words: a command sent again
    gets what it got the first time, its errors in Disque's order (the options,
    then the timeout, then the checks between options), and a refused one is
    never kept."""
    server = new_server()
    client = new_client(server)
    commands = [
        ("x", "DELAY", "20", "TTL", "10"),  # the timeout's error before DELAY > TTL's
        ("0", "DELAY", "20", "TTL", "10"),
        ("0", "TTL", "100", "RETRY", "7", "BAD"),
        ("-1", "TTL", "100", "RETRY", "7"),  # options kept by the next one's first time
        ("0", "TTL", "100", "RETRY", "7"),
        ("0", "ttl", "100", "retry", "7"),
    ]
    first: list[list[bytes]] = []
    for round_ in range(3):
        for i, words in enumerate(commands):
            argv = [b"ADDJOB", b"q", b"body", *(w.encode() for w in words)]
            addjob_command(client, argv)
            sent = replies(client)
            if round_ == 0:
                first.append(sent)
            elif sent[0][:1] == b"+":  # a new job each time
                assert first[i][0][:1] == b"+"
            else:
                assert sent == first[i], words
    assert [sent[0][:1] for sent in first] == [b"-", b"-", b"-", b"-", b"+", b"+"]
    assert first[0] == [b"-ERR timeout is not an integer or out of range\r\n"]
    assert first[1] == [DELAY_OVER_TTL]
    assert first[2] == [SYNTAX]
    assert first[3] == [b"-ERR timeout is negative\r\n"]
    job = server.jobs.lookup(first[4][0][1:-2])
    assert job is not None and (job.retry, job.etime - job.ctime // 10**9) == (7, 100)


def test_the_jobs_of_a_node_share_one_nodes_delivered_tuple() -> None:
    """Jobs created here list this node alone in one shared tuple (cluster.myself_only),
    not a tuple each: compiled, an attribute of a fixed-length tuple type would be a
    new tuple at every read."""
    server = new_server()
    client = new_client(server)
    ids = []
    for _ in range(2):
        addjob_command(client, [b"ADDJOB", b"q", b"body", b"0"])
        ids.append(replies(client)[0][1:-2])
    first, second = (server.jobs.lookup(jid) for jid in ids)
    assert first is not None and second is not None
    assert first.nodes_delivered == (server.cluster.myself.id,)
    assert first.nodes_delivered is second.nodes_delivered
