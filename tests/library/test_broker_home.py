"""What Dramatiq's and kombu's own test suites (bench/peer_suites.py) found in our
brokers, on a real 3-node cluster: a process's clients all on one node
(disque/brokers/home.py), so what it adds is where its own consumer and its
non-blocking reads look; the message Dramatiq's ``send`` returns equal to the
one its actor gets; a nack of a message Disque did not deliver."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing

import pytest

from testkit.nodes import ClusterOfNodes
from testkit.workers import addr

dramatiq = pytest.importorskip("dramatiq")
kombu = pytest.importorskip("kombu")

from dramatiq import Message, Worker  # noqa: E402
from dramatiq.middleware import CurrentMessage  # noqa: E402
from dramatiq.results import Results  # noqa: E402

import disque.brokers.kombu  # noqa: E402, F401  (registers disque://)
from disque.brokers.dramatiq import DisqueBackend, DisqueBroker  # noqa: E402
from disque.brokers.home import Home  # noqa: E402
from disque.client import Client  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def node_of(client: Client) -> object:
    """The node the client runs its commands on."""
    client.hello()
    return client.address


@pytest.fixture
def seeds(cluster3: ClusterOfNodes) -> list[str]:
    return [addr(n) for n in cluster3]


@pytest.fixture
def broker(seeds: list[str]) -> Iterator[DisqueBroker]:
    broker = DisqueBroker(*seeds)
    broker.emit_after("process_boot")
    dramatiq.set_broker(broker)
    yield broker
    broker.close()


@pytest.fixture
def worker(broker: DisqueBroker) -> Iterator[Worker]:
    worker = Worker(broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield worker
    worker.stop()


def test_a_process_clients_are_on_one_node(seeds: list[str], broker: DisqueBroker) -> None:
    """Every thread's client, the consumer's, a second broker's and the result
    backend's, whichever order the seeds come in."""
    backend = DisqueBackend(*reversed(seeds))
    other_thread: list[object] = []
    thread = threading.Thread(target=lambda: other_thread.append(node_of(broker.client())))
    thread.start()
    thread.join()
    addresses = {
        node_of(broker.client()),
        node_of(broker.new_client()),
        node_of(DisqueBroker(*seeds).client()),
        node_of(backend.client()),
        *other_thread,
    }
    assert addresses == {Home.of(seeds).address}


def test_the_message_sent_is_the_message_received(broker: DisqueBroker, worker: Worker) -> None:
    """Dramatiq's own brokers return the message as its actor gets it (their ID in
    its options): so does ours, with its job's ID."""
    broker.add_middleware(CurrentMessage())
    received: list[Message] = []

    @dramatiq.actor
    def accessor(x: int) -> None:
        current = CurrentMessage.get_current_message()
        assert current is not None
        received.append(current._message)

    sent = [accessor.send(1), accessor.send(2)]
    broker.join(accessor.queue_name)
    worker.join()
    assert sorted(sent, key=lambda m: m.args) == sorted(received, key=lambda m: m.args)
    assert all(m.options["disque_job_id"] for m in sent)


def test_results_read_without_waiting_once_the_queue_is_joined(
    seeds: list[str], broker: DisqueBroker, worker: Worker
) -> None:
    """The worker stores a result from its threads, the caller reads it without
    blocking: on the same node, so always there (20 rounds)."""
    backend = DisqueBackend(*seeds)
    broker.add_middleware(Results(backend=backend))

    @dramatiq.actor(store_results=True)
    def double(x: int) -> int:
        return 2 * x

    for i in range(20):
        message = double.send(i)
        broker.join(double.queue_name)
        worker.join()
        assert backend.get_result(message) == 2 * i


def test_a_nack_of_a_message_disque_did_not_deliver(broker: DisqueBroker, worker: Worker) -> None:
    """Dead-lettered, and nothing to acknowledge (Dramatiq's issue #320)."""

    @dramatiq.actor(max_retries=0)
    def do_work() -> None:
        raise RuntimeError

    consumer = broker.consume(do_work.queue_name)
    try:
        consumer.nack(Message(do_work.queue_name, do_work.actor_name, (), {}, {}))
        consumer.ack(Message(do_work.queue_name, do_work.actor_name, (), {}, {}))
    finally:
        consumer.close()
    assert len(broker.live_jobs(f"{do_work.queue_name}.XQ")) == 1


def test_kombu_get_nowait_finds_what_was_put_and_requeued(seeds: list[str]) -> None:
    """basic_get (GETJOB NOHANG) sees what the same process put or requeued: on
    every connection, not only when a channel's clients happen to land on one node."""
    for i in range(10):
        connection = kombu.Connection(
            f"disque://{seeds[0]}", transport_options={"nodes": seeds[1:]}
        )
        with connection as conn, closing(conn.SimpleQueue("home-test")) as queue:
            queue.put({"n": i})
            message = queue.get_nowait()
            assert message.payload == {"n": i}
            message.requeue()
            again = queue.get_nowait()
            assert again.payload == {"n": i}
            again.ack()
            with pytest.raises(queue.Empty):
                queue.get_nowait()
