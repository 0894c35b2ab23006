"""maxmemory and the memory section of INFO."""

from __future__ import annotations

import pytest
import redis

from testkit.conformance import Conn
from testkit.nodes import Node, as_dict, wait_for

pytestmark = pytest.mark.timeout(60)

MEMORY_FIELDS = [
    "used_memory",
    "used_memory_human",
    "used_memory_rss",
    "used_memory_peak",
    "used_memory_peak_human",
    "mem_fragmentation_ratio",
    "mem_allocator",
]
OOM = ("-", "OOM command not allowed when used memory > 'maxmemory'.")


def memory(raw: Conn) -> dict[str, str]:
    t, text = raw.call("INFO", "memory")
    assert t == "$"
    lines = [line for line in text.replace("\r", "").split("\n") if line]
    assert lines[0] == "# Memory"
    return dict(line.split(":", 1) for line in lines[1:])


def used(raw: Conn) -> int:
    return int(memory(raw)["used_memory"])


def test_info_memory_fields(raw: Conn) -> None:
    mem = memory(raw)
    assert list(mem) == MEMORY_FIELDS
    assert int(mem["used_memory"]) > 0
    assert int(mem["used_memory_rss"]) > 0
    assert int(mem["used_memory_peak"]) >= int(mem["used_memory"])
    assert mem["used_memory_human"][-1] in "BKMG"
    float(mem["mem_fragmentation_ratio"])


def test_used_memory_grows_with_jobs(client: redis.Redis, raw: Conn) -> None:
    before = used(raw)
    body = b"x" * 40_000
    with client.pipeline(transaction=False) as p:
        for i in range(200):  # 8 MB of bodies
            p.execute_command("ADDJOB", "big", body + str(i).encode(), 0)
        p.execute()
    wait_for(
        lambda: used(raw) >= before + 4_000_000,
        5,
        interval=0.1,
        message="used_memory to grow by 4 MB",
    )
    wait_for(
        lambda: int(memory(raw)["used_memory_peak"]) >= before + 4_000_000,
        5,
        interval=0.1,
        message="used_memory_peak to follow",
    )


def test_config_maxmemory(raw: Conn) -> None:
    assert raw.call("CONFIG", "SET", "maxmemory", "104857600") == ("+", "OK")
    assert raw.call("CONFIG", "GET", "maxmemory") == ("*", [("$", "maxmemory"), ("$", "104857600")])


def test_addjob_refused_over_maxmemory(raw: Conn) -> None:
    assert raw.call("ADDJOB", "q", "before", "0")[0] == "+"
    assert raw.call("CONFIG", "SET", "maxmemory", "1") == ("+", "OK")
    wait_for(
        lambda: raw.call("ADDJOB", "q", "x", "0") == OOM, 5, interval=0.05, message="ADDJOB -> OOM"
    )
    assert raw.call("ADDJOB", "q", "x", "0", "ASYNC") == OOM
    assert raw.call("QLEN", "q") == (":", 1)


def test_addjob_accepted_again_when_limit_lifted(raw: Conn) -> None:
    raw.call("CONFIG", "SET", "maxmemory", "1")
    wait_for(
        lambda: raw.call("ADDJOB", "q", "x", "0") == OOM, 5, interval=0.05, message="ADDJOB -> OOM"
    )
    assert raw.call("CONFIG", "SET", "maxmemory", "0") == ("+", "OK")
    wait_for(
        lambda: raw.call("ADDJOB", "q", "x", "0")[0] == "+",
        5,
        interval=0.05,
        message="ADDJOB accepted",
    )


def test_non_growing_commands_work_over_maxmemory(raw: Conn) -> None:
    jid = raw.call("ADDJOB", "q", "body", "0")[1]
    jid2 = raw.call("ADDJOB", "q", "body2", "0")[1]
    raw.call("CONFIG", "SET", "maxmemory", "1")
    wait_for(
        lambda: raw.call("ADDJOB", "q", "x", "0") == OOM, 5, interval=0.05, message="ADDJOB -> OOM"
    )
    assert raw.call("PING") == ("+", "PONG")
    assert raw.call("QLEN", "q") == (":", 2)
    assert raw.call("SHOW", jid)[0] == "*"
    assert raw.call("GETJOB", "FROM", "q") == (
        "*",
        [("*", [("$", "q"), ("$", jid), ("$", "body")])],
    )
    assert raw.call("ACKJOB", jid) == (":", 1)
    assert raw.call("DELJOB", jid2) == (":", 1)
    assert raw.call("INFO", "memory")[0] == "$"
    assert raw.call("CONFIG", "GET", "maxmemory") == ("*", [("$", "maxmemory"), ("$", "1")])


# ---- maxmemory in a cluster: used_memory is the data ---------------------------------------


def holders_of(cluster, jid: bytes) -> list[bytes]:
    """The state of the job on every node that has it."""
    return [as_dict(show)[b"state"] for n in cluster if (show := n.call("SHOW", jid))]


def test_empty_node_uses_little_and_rss_apart(node: Node) -> None:
    mem = node.info("memory")
    assert mem["used_memory"] < 100_000 < mem["used_memory_rss"]


def test_used_memory_shrinks_when_jobs_go(node: Node) -> None:
    before = node.info("memory")["used_memory"]
    ids = [node.call("ADDJOB", "q", "x" * 1000, "0") for _ in range(100)]
    grown = node.info("memory")["used_memory"]
    assert grown - before >= 100 * 1000
    node.call("DELJOB", *ids)
    assert node.info("memory")["used_memory"] <= before + 10_000


def test_maxmemory_3mb_replicates_externally_then_refuses(start_cluster) -> None:
    cluster = start_cluster(3)
    first = cluster[0]
    assert first.call("CONFIG", "SET", "maxmemory", "3mb") == b"OK"
    body = "x" * 200
    external: dict[int, bytes] = {}
    with first.client() as c:
        for i in range(20_000):
            repl = 1 + i % 2
            jid = c.execute_command("ADDJOB", "q", body, "5000", "REPLICATE", str(repl))
            if c.execute_command("SHOW", jid) is None:
                assert sum(s in (b"queued", b"active") for s in holders_of(cluster, jid)) >= repl
                external[repl] = jid
                if len(external) == 2:
                    break
    assert len(external) == 2, "node 0 never replicated externally under maxmemory 3mb"
    assert first.info("memory")["used_memory"] < 3 * 1024 * 1024

    # No room anywhere: every node at 100%. The replies are -OOM or -NOREPL, never a crash.
    for node in cluster:
        assert node.call("CONFIG", "SET", "maxmemory", "1mb") == b"OK"
    with first.client() as c:
        for repl in (1, 2, 3) * 3:
            with pytest.raises(redis.ResponseError) as err:
                c.execute_command("ADDJOB", "q", body, "200", "REPLICATE", str(repl))
            assert isinstance(err.value, redis.exceptions.OutOfMemoryError) or str(
                err.value
            ).startswith("NOREPL"), err.value
    assert first.is_running() and first.call("PING")


def test_used_memory_follows_the_real_cost_of_jobs(node: Node) -> None:
    """The counters against the process' growth: 30,000 jobs, 2 KB bodies, 10 queues."""
    before = node.info("memory")
    with node.client() as c:
        for start in range(0, 30_000, 1000):
            with c.pipeline(transaction=False) as p:
                for i in range(start, start + 1000):
                    p.execute_command("ADDJOB", f"q{i % 10}", b"%06d" % i + b"x" * 2000, "0")
                p.execute()
    after = node.info("memory")
    counted = after["used_memory"] - before["used_memory"]
    real = after["used_memory_rss"] - before["used_memory_rss"]
    assert 0.8 < counted / real < 1.25, (counted, real)


def test_oom_from_95_percent_unless_the_command_makes_room(raw: Conn) -> None:
    """Disque's freeMemoryIfNeeded: above 95% of maxmemory a command that grows memory
    first evicts what it may (policy acks) and is refused while the node stays above."""
    body = "x" * 50_000
    for _ in range(10):  # delivered RETRY 0 jobs: evictable
        assert raw.call("ADDJOB", "once", body, "0", "RETRY", "0")[0] == "+"
    assert len(raw.call("GETJOB", "COUNT", "10", "FROM", "once")[1]) == 10
    for _ in range(10):  # queued jobs: never evicted
        assert raw.call("ADDJOB", "kept", body, "0")[0] == "+"

    def at_97_percent() -> None:
        assert raw.call("CONFIG", "SET", "maxmemory", str(int(used(raw) / 0.97))) == ("+", "OK")

    # noeviction: refused from 95%, although below the limit.
    raw.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
    at_97_percent()
    assert raw.call("ADDJOB", "kept", "y", "0") == OOM
    assert raw.call("QLEN", "once") == (":", 0) and used(raw) > 10 * len(body)

    # acks: the ADDJOB evicts the delivered RETRY 0 jobs, and is accepted.
    raw.call("CONFIG", "SET", "maxmemory-policy", "acks")
    assert raw.call("ADDJOB", "kept", "y", "0")[0] == "+"
    assert used(raw) < 15 * len(body)

    # acks, nothing left to evict: refused again from 95%.
    at_97_percent()
    assert raw.call("ADDJOB", "kept", "z", "0") == OOM
    assert raw.call("QLEN", "kept") == (":", 11)


def test_timers_come_back_after_a_job_cycle_with_a_long_retry(node: Node) -> None:
    """Jobs that live past a tick are filed in a timer bucket of their re-queue time
    (RETRY 3600: an hour ahead); acknowledging them must give the buckets back at
    once, not an hour later (INFO timers is the node's own accounting of them)."""
    start = node.info("timers")
    used_before = node.info("memory")["used_memory"]
    assert start["timer_buckets"] == start["timer_filed_jobs"] == 0
    with node.client() as c:
        for _ in range(100):
            pipe = c.pipeline(transaction=False)
            for _ in range(200):
                pipe.execute_command("ADDJOB", "cycle", "x" * 100, "0", "RETRY", "3600")
            pipe.execute()
            # Filed by the cron (place_unplaced) before they are fetched and acked.
            wait_for(lambda: node.info("timers")["timer_filed_jobs"] == 200, 5)
            jobs = c.execute_command("GETJOB", "NOHANG", "COUNT", "200", "FROM", "cycle")
            c.execute_command("ACKJOB", *[job[1] for job in jobs])
    timers = node.info("timers")
    assert node.info("jobs")["registered_jobs"] == 0
    assert timers["timer_buckets"] == timers["timer_filed_jobs"] == 0
    # Every round filed its jobs in new buckets (at least one), and left their keys in
    # the heap once emptied: 100 keys or more, had the heap not been rebuilt on the way
    # (whenever it holds over twice the live buckets + 64 keys).
    assert timers["timer_heap_keys"] < 100
    assert node.info("memory")["used_memory"] <= used_before + 10_000
