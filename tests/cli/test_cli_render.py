"""disque's renderers against redis-cli's own output, reply shape by reply shape.

fixtures/redis_cli_outputs.json holds the reply bytes a redis-server sent for
each case of cli_cases.py and what redis-cli printed for them in standard
(terminal), --raw and --csv modes (record_redis_cli.py). Here the same bytes
go through disque's parser and renderers: the output must be identical.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from disque_cli.render import Mode, RenderOptions, quote, render
from disque_cli.replies import ErrorReply, Status, parse_all

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "redis_cli_outputs.json")
                      .read_text())["cases"]
MODES = {"standard": Mode.STANDARD, "raw": Mode.RAW, "csv": Mode.CSV}


def _reply(name: str):
    replies, used = parse_all(base64.b64decode(RECORDED[name]["resp"]))
    assert len(replies) == 1 and used > 0
    return replies[0]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_same_output_as_redis_cli(name: str, mode: str) -> None:
    expected = base64.b64decode(RECORDED[name]["outputs"][mode])
    assert render(_reply(name), RenderOptions(mode=MODES[mode])) == expected


def test_reply_types_are_kept() -> None:
    mixed = _reply("mixed")
    assert [type(x) for x in mixed[:5]] == [int, bytes, Status, ErrorReply, type(None)]
    assert isinstance(_reply("status"), Status)
    assert _reply("nil_array") is None


def test_quote_escapes_like_sdscatrepr() -> None:
    assert quote(b'a"b\\c\n\x00\xff ~') == b'"a\\"b\\\\c\\n\\x00\\xff ~"'


def test_raw_delimiters() -> None:
    options = RenderOptions(mode=Mode.RAW, mb_delim=b",", cmd_delim=b"|")
    assert render([b"a", [1, None], Status(b"OK")], options) == b"a,1,,OK|"


def test_json_shapes() -> None:
    options = RenderOptions(mode=Mode.JSON)
    show = _reply("show_like")
    job = json.loads(render(show, options, shape="pairs"))
    assert job["id"].startswith("D-") and job["repl"] == 1
    assert job["next-requeue-within"] is None and job["nodes-confirmed"] == []
    assert json.loads(render(show, options))[:4] == ["id", job["id"], "queue", "q1"]
    hello = [1, b"aa", [b"aa", b"", b"7711", b"1"]]
    assert json.loads(render(hello, options, shape="hello")) == {
        "version": 1, "id": "aa", "nodes": [{"id": "aa", "host": "", "port": 7711,
                                             "priority": 1}]}
    info = (b"# Server\r\ndisque_version:1.0-rc1\r\npython_version:3.11\r\nrun_id:0123\r\n"
            b"\r\n# Jobs\r\nregistered_jobs:5\r\n\r\n# Stats\r\ninstantaneous_input_kbps:0.25\r\n"
            b"mem_fragmentation_ratio:-1.5\r\nused_memory_human:1.50M\r\n")
    assert json.loads(render(info, options, shape="info")) == {
        "server": {"disque_version": "1.0-rc1", "python_version": "3.11", "run_id": "0123"},
        "jobs": {"registered_jobs": 5},
        "stats": {"instantaneous_input_kbps": 0.25, "mem_fragmentation_ratio": -1.5,
                  "used_memory_human": "1.50M"}}
    assert render(info, options, shape="info").startswith(b'{"server":{"disque_version":')
    assert json.loads(render(ErrorReply(b"ERR x"), options, shape="pairs")) == {"error": "ERR x"}
    jscan = [b"0", [[b"id", Status(b"D-1"), b"body", b"x"]]]
    assert json.loads(render(jscan, options, shape="jscan")) == ["0", [{"id": "D-1",
                                                                       "body": "x"}]]


def test_verbatim_text_is_printed_as_is_in_every_mode_but_json() -> None:
    text = b"# Jobs\r\nregistered_jobs:5\r\n"
    for mode in (Mode.STANDARD, Mode.RAW, Mode.CSV):
        assert render(text, RenderOptions(mode=mode), verbatim=True) == text
