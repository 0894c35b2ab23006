"""ACK propagation and garbage collection, dummy ACKs, FASTACK."""

from __future__ import annotations

from testkit.nodes import as_dict, messages_received, wait_for


def gone_everywhere(cluster, jid: bytes) -> bool:
    return all(n.call("SHOW", jid) is None for n in cluster if n.is_running())


def test_ack_on_origin_removes_every_copy(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    a.call("GETJOB", "FROM", "q")
    assert a.call("ACKJOB", jid) == 1
    wait_for(lambda: gone_everywhere(cluster3, jid), 10, message="GC of every copy")


def test_ack_on_a_replica_removes_every_copy(cluster3):
    a, b, _ = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    assert b.call("ACKJOB", jid) == 1
    wait_for(lambda: gone_everywhere(cluster3, jid), 10, message="GC of every copy")
    assert a.call("QLEN", "q") == 0


def test_ackjob_replies_once_every_owner_has_the_ack(cluster3):
    """ACKJOB waits for the SETACK/GOTACK round trip when every owner is reachable,
    so the job is gone from the acking node by the client's next command."""
    a, b, _ = cluster3
    with b.client() as conn:
        for _ in range(10):
            jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
            pipe = conn.pipeline(transaction=False)  # SHOW arrives with the ACKJOB
            pipe.execute_command("ACKJOB", jid)
            pipe.execute_command("SHOW", jid)
            assert pipe.execute() == [1, None]


def test_ack_to_a_non_owner_reaches_the_owners(start_cluster):
    cluster = start_cluster(4)
    a, b, c, d = cluster
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "2")
    non_owner = next(n for n in (b, c, d) if n.call("SHOW", jid) is None)
    assert non_owner.call("ACKJOB", jid) == 0  # a dummy ACK, as in Disque
    wait_for(lambda: gone_everywhere(cluster, jid), 10, message="owners reached by the dummy ACK")
    assert a.call("QLEN", "q") == 0


def test_ack_kept_while_an_owner_is_down_then_collected(cluster3):
    a, b, c = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    c.pause()
    try:
        assert a.call("ACKJOB", jid) == 1
        for _ in range(3):  # GC cannot finish: the ACK stays on a and b
            state = as_dict(a.call("SHOW", jid))[b"state"]
            assert state == b"acked"
    finally:
        c.resume()
    wait_for(lambda: gone_everywhere(cluster3, jid), 20, message="GC after the owner is back")


def test_dummy_ack_of_unknown_job_is_dropped_cluster_wide(cluster3):
    a = cluster3[0]
    fake = b"D-deadbeef-AAAAAAAAAAAAAAAAAAAAAAAA-05a1"
    assert a.call("ACKJOB", fake) == 0
    wait_for(lambda: gone_everywhere(cluster3, fake), 10, message="dummy ACK dropped")


def test_fastack_deletes_every_copy(cluster3):
    a, b, c = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    assert b.call("FASTACK", jid) == 1
    wait_for(lambda: gone_everywhere(cluster3, jid), 5, message="DELJOB everywhere")


def test_fastack_of_job_unknown_here_broadcasts_deljob(start_cluster):
    cluster = start_cluster(3)
    a, b, c = cluster
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "2")
    non_owner = next(n for n in (b, c) if n.call("SHOW", jid) is None)
    assert non_owner.call("FASTACK", jid) == 0
    wait_for(lambda: gone_everywhere(cluster, jid), 5, message="DELJOB broadcast")


def test_the_gc_of_many_jobs_travels_in_few_messages(cluster3):
    """One ACKJOB of 60 jobs: a paused owner finds their SETACKs waiting and answers
    with one GOTACK for all (far fewer messages than jobs), and every copy goes."""
    a, b, _ = cluster3
    ids = [a.call("ADDJOB", "q", f"job{i}", "5000", "REPLICATE", "3") for i in range(60)]
    b.pause()
    try:
        assert a.call("ACKJOB", *ids) == 60
        before = messages_received(a)
    finally:
        b.resume()
    wait_for(
        lambda: all(gone_everywhere(cluster3, jid) for jid in ids), 10, message="GC of every copy"
    )
    # Without batching, b alone would answer with one GOTACK per job; the rest is gossip.
    assert messages_received(a) - before < len(ids) // 2
