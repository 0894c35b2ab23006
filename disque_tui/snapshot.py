"""The immutable picture of the cluster that the poller hands to the widgets.

A `ClusterSnapshot` is everything a panel may show: nodes (with their
history for sparklines and drain estimates) and queues merged across nodes
(with per-node detail and rate history). Snapshots are frozen dataclasses of
tuples: the poller builds a new one every cycle, widgets only read them, and
tests build them by hand from fixed data. The pure helpers that merge
per-node data live here too, so they are tested without sockets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from disque.scan import OutOfQueue
from disque.tasks.census import TaskTally

# ---------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drain:
    """How a leaving node empties: jobs left, jobs per second leaving, ETA (s)."""

    jobs_left: int
    start_jobs: int
    rate: float | None
    eta: float | None

    @property
    def progress(self) -> float:
        """0..1, how much of what the node held when it started leaving is gone."""
        if self.start_jobs <= 0:
            return 1.0
        return max(0.0, min(1.0, 1 - self.jobs_left / self.start_jobs))


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    id: str
    host: str
    port: int
    status: str = "up"  # "up" | "slow" (poll overdue) | "down" (poll failed)
    priority: int | None = None  # HELLO priority as the cluster reports it
    flags: tuple[str, ...] = ()  # CLUSTER NODES flags: leaving, pfail, fail, ...
    error: str | None = None
    last_seen_ago: float | None = None  # seconds since the last successful poll
    latency_ms: float | None = None  # duration of the last successful poll
    jobs: int | None = None
    queues: int | None = None
    clients: int | None = None
    blocked: int | None = None
    memory: int | None = None
    ops_per_sec: int | None = None
    version: str = ""
    server: str = ""  # "C" or "python" (disque.protocol.server_kind); "" before INFO
    jobs_history: tuple[int, ...] = ()
    ops_history: tuple[int, ...] = ()
    drain: Drain | None = None
    # Down: the jobs it holds that the nodes up hold copies of (their nodes-delivered
    # name it), from their last JSCAN: what it strands, even if never seen up.
    copies_elsewhere: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def leaving(self) -> bool:
        return "leaving" in self.flags or self.priority == 100

    @property
    def up(self) -> bool:
        return self.status == "up"

    @property
    def failing(self) -> bool:
        return "fail" in self.flags or "pfail" in self.flags


# ---------------------------------------------------------------------------
# Queues
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueOnNode:
    """One queue as one node sees it (QSTAT) plus rates from the counters."""

    node_id: str
    length: int
    age: int = 0
    idle: int = 0
    blocked: int = 0
    import_from: tuple[str, ...] = ()
    import_rate: int = 0
    jobs_in: int = 0
    jobs_out: int = 0
    pause: str = "none"
    in_rate: float = 0.0
    out_rate: float = 0.0
    oldest: float | None = None  # age in seconds of its oldest job, when known
    stale: float | None = None  # the node is down: seconds since these figures
    # were current (None: live)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A queue merged across every node that has it."""

    name: str
    length: int
    per_node: tuple[QueueOnNode, ...]
    blocked: int = 0
    import_rate: int = 0
    import_from: tuple[str, ...] = ()
    in_rate: float = 0.0
    out_rate: float = 0.0
    pause: str = "none"  # none | in | out | all | mixed
    oldest: float | None = None  # age of the oldest job on any node, seconds

    def on_node(self, node_id: str) -> QueueOnNode | None:
        for q in self.per_node:
            if q.node_id == node_id:
                return q
        return None

    @property
    def stranded(self) -> int:
        """Jobs last seen queued on nodes that are now down: nobody can get them."""
        return sum(q.length for q in self.per_node if q.stale is not None)

    @property
    def stale_age(self) -> float | None:
        """How old the oldest stale figure of this queue is (None: all live)."""
        ages = [q.stale for q in self.per_node if q.stale is not None]
        return max(ages) if ages else None

    @property
    def live_length(self) -> int:
        return self.length - self.stranded

    @property
    def not_draining(self) -> bool:
        """Jobs come in and none go out: nothing consumes it."""
        return self.live_length > 0 and self.in_rate > 0 and self.out_rate == 0


def merge_pause(states: Iterable[str]) -> str:
    """The pause state of a queue across nodes: the common one, else "mixed"."""
    seen = set(states)
    if not seen:
        return "none"
    return seen.pop() if len(seen) == 1 else "mixed"


def merge_queue(name: str, per_node: Sequence[QueueOnNode]) -> QueueSnapshot:
    if len(per_node) == 1:  # the common case, kept cheap: a thousand queues per cycle
        q = per_node[0]
        return QueueSnapshot(
            name,
            q.length,
            (q,),
            q.blocked,
            q.import_rate,
            q.import_from,
            q.in_rate,
            q.out_rate,
            q.pause,
            q.oldest,
        )
    ages = [q.oldest for q in per_node if q.oldest is not None]
    imports: dict[str, None] = {}
    for q in per_node:
        imports.update(dict.fromkeys(q.import_from))
    return QueueSnapshot(
        name=name,
        length=sum(q.length for q in per_node),
        per_node=tuple(per_node),
        blocked=sum(q.blocked for q in per_node),
        import_rate=sum(q.import_rate for q in per_node),
        import_from=tuple(imports),
        in_rate=sum(q.in_rate for q in per_node),
        out_rate=sum(q.out_rate for q in per_node),
        pause=merge_pause(q.pause for q in per_node),
        oldest=max(ages) if ages else None,
    )


def counter_rate(previous: int | None, current: int, seconds: float) -> float:
    """Per-second rate of a cumulative counter; a reset (queue recreated) counts as 0."""
    if previous is None or seconds <= 0 or current < previous:
        return 0.0
    return (current - previous) / seconds


def drain_estimate(
    history: Sequence[tuple[float, int]], start_jobs: int, window: float = 10.0
) -> Drain | None:
    """Drain progress of a leaving node from its (time, registered_jobs) samples:
    the rate is the fall of the job count over the last `window` seconds."""
    if not history:
        return None
    t_now, jobs_now = history[-1]
    rate: float | None = None
    for t, jobs in history:
        if t_now - t <= window and t < t_now:
            rate = max(0.0, (jobs - jobs_now) / (t_now - t))
            break
    eta = jobs_now / rate if rate else (0.0 if jobs_now == 0 else None)
    return Drain(jobs_left=jobs_now, start_jobs=max(start_jobs, jobs_now), rate=rate, eta=eta)


# ---------------------------------------------------------------------------
# The whole cluster
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskCensus:
    """The calls of each task (disque.tasks.census), while the Tasks tab is shown:
    ``scanned`` once a tally was made, ``left_out`` the nodes not in it (too many
    jobs to scan, or not scanned with bodies yet)."""

    scanned: bool = False
    tasks: tuple[TaskTally, ...] = ()
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    taken_at: float  # wall clock (epoch seconds)
    seed: str  # host:port the dashboard was started with
    nodes: tuple[NodeSnapshot, ...] = ()
    queues: tuple[QueueSnapshot, ...] = ()
    cycle: int = 0
    poll_ms: float = 0.0  # how long the last poll cycle took
    # one entry per recent cycle, oldest first: {queue: (import rate, jobs-out rate)} for
    # the queues whose rates were not zero; sparse, so a thousand idle queues cost nothing
    rate_history: tuple[Mapping[str, tuple[float, float]], ...] = ()
    error: str | None = None  # why the last cycle could not poll at all
    # jobs queued on no node, by queue (disque.scan.out_of_queue), the largest first:
    # scanned every OUT_OF_QUEUE_EVERY seconds, not every cycle
    out_of_queue: tuple[OutOfQueue, ...] = ()
    tasks: TaskCensus = field(default_factory=TaskCensus)
    _queue_index: dict[str, QueueSnapshot] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self._queue_index and self.queues:
            self._queue_index.update((q.name, q) for q in self.queues)

    def node(self, node_id: str) -> NodeSnapshot | None:
        for n in self.nodes:
            if n.id == node_id:
                return n
        return None

    def queue(self, name: str) -> QueueSnapshot | None:
        return self._queue_index.get(name)

    def queue_history(self, name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Import rate and throughput (jobs-out/s) of a queue over the recent cycles."""
        zero = (0.0, 0.0)
        samples = [cycle.get(name, zero) for cycle in self.rate_history]
        return tuple(s[0] for s in samples), tuple(s[1] for s in samples)

    @property
    def nodes_up(self) -> int:
        return sum(1 for n in self.nodes if n.up)

    @property
    def total_jobs(self) -> int:
        """Jobs held by the nodes up, replica copies included (registered_jobs): a job
        replicated on three nodes counts three times."""
        return sum(n.jobs or 0 for n in self.nodes if n.up)

    @property
    def total_queued(self) -> int:
        """Jobs waiting in a queue on a node up. A job is queued on one node at a
        time (its copies elsewhere wait, unqueued), so this counts unique jobs."""
        return sum(q.live_length for q in self.queues)

    @property
    def total_stranded(self) -> int:
        """Jobs last seen queued on nodes now down."""
        return sum(q.stranded for q in self.queues)

    def short_name(self, node_id: str) -> str:
        """How a node is named in compact places: its 8-char ID prefix, or the
        address when the ID is unknown."""
        node = self.node(node_id)
        return node.short_id if node else node_id[:8]


# ---------------------------------------------------------------------------
# Drill-down results (fetched on demand, never part of a poll)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeekedJob:
    queue: str
    id: str
    body: bytes


@dataclass(frozen=True, slots=True)
class QueuePeek:
    """QPEEK of one queue on one node: its oldest and newest jobs."""

    node_id: str
    address: str
    oldest: tuple[PeekedJob, ...] = ()
    newest: tuple[PeekedJob, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JobShow:
    """SHOW of one job on one node; `fields` is None when the node does not know it."""

    node_id: str
    address: str
    fields: dict | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NodeViews:
    """What an operator looks at on one node (fetched when its detail opens): its
    clients (CLIENT LIST, one dict a client), the slow log (SLOWLOG GET: id, when,
    µs, the command), the latency events (LATENCY LATEST: event, when, last ms, max
    ms) and its configuration (CONFIG GET *, by name)."""

    node_id: str
    address: str
    clients: tuple[dict[str, str], ...] = ()
    slowlog: tuple[tuple[int, int, int, str], ...] = ()
    latency: tuple[tuple[str, int, int, int], ...] = ()
    config: tuple[tuple[str, str], ...] = ()
    error: str | None = None
