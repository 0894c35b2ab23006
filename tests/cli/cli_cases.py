"""Reply shapes used to compare `disque` with redis-cli.

Each case is a command a stock redis-server answers with the reply shape
named (Lua scripts through EVAL can build any RESP2 reply), chosen to cover
what Disque answers: statuses like ADDJOB's `+D-...`, errors, integers,
quoted bulk strings with escapes, nil bulk and nil array, empty and nested
arrays, arrays long enough to align their indexes (SHOW, QSTAT, QPEEK).
"""

from __future__ import annotations

SHOW_LIKE = (
    "return {'id','D-acae81c2-RLJfH5RPT/s3tzmYGFPenuVC-05a1','queue','q1','state',"
    "'queued','repl',1,'ttl',86400,'ctime',1795316016932000000,'delay',0,'retry',300,"
    "'nacks',0,'additional-deliveries',0,'nodes-delivered',"
    "{'acae81c24529df22e428fb7e51bd0ccb0cca2d9b'},'nodes-confirmed',{},"
    "'next-requeue-within',false,'next-awake-within',299286,'body','body1'}"
)

CASES: dict[str, list[str]] = {
    "status": [
        "EVAL",
        "return redis.status_reply('D-acae81c2-RLJfH5RPT/s3tzmYGFPenuVC-05a1')",
        "0",
    ],
    "status_ok": ["EVAL", "return redis.status_reply('OK')", "0"],
    "error": ["EVAL", "return redis.error_reply('BADID Invalid Job ID format.')", "0"],
    "integer": ["EVAL", "return 300", "0"],
    "negative_integer": ["EVAL", "return -42", "0"],
    "bulk": ["EVAL", "return 'hello world'", "0"],
    "empty_bulk": ["EVAL", "return ''", "0"],
    "bulk_escapes": ["EVAL", "return 'q\"uo\\\\te\\n\\r\\t\\a\\b\\0\\1\\127\\255 é,x'", "0"],
    "nil_bulk": ["EVAL", "return false", "0"],
    "nil_array": ["BLPOP", "cli-test-empty-list", "0.01"],
    "empty_array": ["EVAL", "return {}", "0"],
    "flat_array": ["EVAL", "return {'q1','D-acae81c2-RLJfH5RPT/s3tzmYGFPenuVC-05a1','body1'}", "0"],
    "long_array": ["EVAL", "local t = {} for i = 1, 12 do t[i] = i * 7 end return t", "0"],
    "nested": ["EVAL", "return {{'q1','id1','body1'},{'q1','id2','body2'}}", "0"],
    "nested_long": [
        "EVAL",
        "local t = {} for i = 1, 11 do t[i] = {'q', 'id' .. i, {}} end "
        "t[12] = {1, {2, {3, {}}}} return t",
        "0",
    ],
    "mixed": [
        "EVAL",
        "return {1, 'two', redis.status_reply('THREE'), "
        "redis.error_reply('ERR four'), false, {}, {5, false}}",
        "0",
    ],
    "show_like": ["EVAL", SHOW_LIKE, "0"],
}
