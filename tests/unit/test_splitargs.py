"""Argument splitting (disque_common/splitargs.py), in-process: Redis's
sdssplitargs, which reads config files and inline commands on the node and
lines in the CLI. What the node and the CLI quote, it reads back."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_cli.render import quote
from disque_common.splitargs import SplitError, split_args
from disque_server.config import quote_word

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

arguments = st.lists(st.binary(max_size=40), max_size=8)
separators = st.text(alphabet=" \t\r\n", min_size=1, max_size=3)
# Words that need no quotes: no word end, no quote, and no \v or \f first (skipped
# as blanks there, kept further on).
plain_words = st.lists(
    st.binary(min_size=1, max_size=20).filter(
        lambda w: not set(w) & set(b" \t\r\n\0\"'") and w[0] not in b"\v\f"
    ),
    max_size=8,
)


@RELAXED
@given(args=arguments, data=st.data())
def test_reads_back_what_the_cli_quotes(args: list[bytes], data: st.DataObject) -> None:
    line = b"".join(quote(arg) + data.draw(separators).encode() for arg in args)
    assert split_args(line) == args


@RELAXED
@given(args=arguments)
def test_reads_back_what_config_rewrite_quotes(args: list[bytes]) -> None:
    words = [quote_word(arg.decode("utf-8", errors="surrogateescape")) for arg in args]
    assert split_args(" ".join(words)) == args


@RELAXED
@given(words=plain_words, data=st.data())
def test_plain_words_split_on_blanks(words: list[bytes], data: st.DataObject) -> None:
    blanks = st.text(alphabet=" \t\r\n\v\f", max_size=3).map(str.encode)
    line = data.draw(blanks) + b"".join(w + data.draw(separators).encode() for w in words)
    assert split_args(line) == words


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"a\vb c\fd", [b"a\vb", b"c\fd"]),  # \v and \f end no word ...
        (b"\v\f a \v\fb", [b"a", b"b"]),  # ... but blanks before one are skipped
        (b'"\\x4" "\\x4g"', [b"x4", b"x4g"]),  # \x needs two hex digits
        (b'"\\X41"', [b"X41"]),
        (b'"\\q\\\\\\""', [b'q\\"']),  # any other escaped byte is itself
        (b"'a\\nb' 'it\\'s'", [b"a\\nb", b"it's"]),  # single quotes know only \'
        (b"x'y z'w", None),  # a quote opens mid-word, must close at a blank
        (b"x'y z' w", [b"xy z", b"w"]),
        (b"\"\" ''", [b"", b""]),
        (b'"a\tb"\t"c"', [b"a\tb", b"c"]),
    ],
)
def test_quirks(line: bytes, expected: list[bytes] | None) -> None:
    if expected is None:
        with pytest.raises(SplitError):
            split_args(line)
    else:
        assert split_args(line) == expected
