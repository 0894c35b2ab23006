"""--cluster leave: remove a node without losing jobs, as the Disque README's
"Graceful removal of nodes" describes it.

    1. CLUSTER LEAVING yes on the node: it replicates new jobs on other nodes
       only, answers -LEAVING to GETJOB that would block, advertises itself
       with priority 100 in HELLO and stops asking other nodes for jobs.
    2. Wait for INFO registered_jobs to reach 0 (a progress bar on a terminal).
       Its queued jobs move only when consumers connected to *other* nodes
       ask for jobs of those queues (federation), and its other jobs go away
       when acknowledged: nothing moves without consumers. Acknowledged jobs
       whose garbage collection waits only on nodes that left before (Disque
       keeps waiting for them until the TTL) do not hold the removal up.
    3. CLUSTER FORGET <id> on every other node.
    4. With --shutdown, SHUTDOWN the node.

Every step reports per node; a node dying on the way gets one clear line and
the remaining steps still run (exit status 1 at the end). When the drain
times out (--timeout) or is interrupted, the node is not forgotten: it stays
in leaving state, ready for another run or for `CLUSTER LEAVING no`.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from disque.protocol import flat_info, server_kind
from disque_cli.cluster import (
    CLOSED,
    ID_PREFIX,
    Column,
    Member,
    NodeDown,
    Output,
    VerbArgs,
    ViewEntry,
    accepting,
    confirmed,
    discover,
    open_target,
    parse_nodes,
    plural,
    queue_lengths,
)
from disque_cli.render import Mode
from disque_cli.replies import ErrorReply
from disque_cli.waiting import ShortScan, duration, jscan, waiting_jobs

USAGE = "leave host:port [--yes] [--shutdown] [--timeout SECS]"
POLL = 0.2  # seconds between INFO polls while draining
STALL_AFTER = 5.0  # seconds without progress before explaining why
ORPHAN_CHECK_MAX = 10_000  # jobs left: at most this many are looked at one by one
PLAIN_EVERY = 1.0  # at most one progress line per second in a pipe
RATE_WINDOW = 5.0  # seconds of history for the jobs/s rate
SEEN_LEAVING_WAIT = 5.0  # seconds to wait for the others to see the leaving flag
SHUTDOWN_WAIT = 10.0  # seconds for the node to stop accepting connections


@dataclass
class Result:
    """What happened to one node, for the summary."""

    member: Member
    role: str
    outcome: list[str] = field(default_factory=list)
    failed: bool = False

    def ok(self, text: str) -> None:
        self.outcome.append(text)

    def fail(self, text: str) -> None:
        self.outcome.append(text)
        self.failed = True


def cluster_leave(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    members = open_target(
        parsed,
        out,
        USAGE,
        "Nothing was changed. A node that is gone for good is forgotten with "
        "`disque --cluster del-node HOST:PORT NODE_ID` (any node up; its ID, or the "
        "first characters of it, as --cluster check shows it).",
    )
    if members is None:
        return 1
    target = members[0]
    try:
        return Leave(out, parsed, members).run()
    except KeyboardInterrupt:
        out.line("")
        out.error(
            f"Interrupted. {target.name} may be left in leaving state: run this "
            f"command again to go on, or undo with "
            f"`{target.cli('cluster', 'leaving', 'no')}`."
        )
        return 130
    finally:
        for member in members:
            member.close()


class Leave:
    def __init__(self, out: Output, parsed: VerbArgs, members: list[Member]) -> None:
        self.out = out
        self.parsed = parsed
        self.target = members[0]
        self.others = members[1:]
        self.results = [Result(self.target, "leaving")] + [Result(m, "other") for m in self.others]
        self.target_gone = False
        self.orphan_acks = 0  # acknowledged jobs waiting only on departed nodes
        self.strays: list[str] = []  # job IDs held here that no owner holds (stray_copies)

    @property
    def mine(self) -> Result:
        return self.results[0]

    def result_of(self, member: Member) -> Result:
        return next(result for result in self.results if result.member is member)

    # ---- the walkthrough ----
    def run(self) -> int:
        out, target = self.out, self.target
        if not self.others:
            out.error(f"{target.name} knows no other node: there is no cluster to leave.")
            return 1
        for member in self.others:
            if not member.refresh(with_info=False):
                out.warn(f"{member.name} is unreachable: {member.error}")
        if not any(member.up for member in self.others):
            out.error(
                "None of the other nodes can be reached: the jobs of "
                f"{target.name} would have nowhere to go. Nothing was changed."
            )
            return 1
        self.explain()
        if not confirmed(out, self.parsed.yes, what="remove the node"):
            return 1
        steps = 4 if self.parsed.shutdown else 3
        out.title(f"Step 1/{steps}: CLUSTER LEAVING yes on {target.name}")
        if not self.set_leaving():
            return self.finish()
        out.title(f"Step 2/{steps}: waiting for the jobs of {target.label} to drain")
        drained = self.drain()
        if drained is False:
            return self.finish()
        out.title(f"Step 3/{steps}: CLUSTER FORGET {target.id} on {len(self.others)} nodes")
        self.forget()
        self.detach()
        if self.parsed.shutdown:
            out.title(f"Step 4/{steps}: SHUTDOWN {target.label}")
            self.shutdown()
        return self.finish()

    def explain(self) -> None:
        target = self.target
        jobs = target.number("registered_jobs")
        queues = target.number("registered_queues")
        up = sum(member.up for member in self.others)
        lines = [
            f"Node {target.id} at {target.label}",
            f"holds {plural(jobs, 'job')} in {plural(queues, 'queue')}; the cluster has "
            f"{plural(len(self.others), 'other node')} ({up} reachable).",
            "",
            "1. CLUSTER LEAVING yes: the node advertises itself as leaving. New jobs added",
            "   there are replicated on other nodes only, GETJOB that would block gets a",
            "   -LEAVING error, and HELLO shows it with priority 100 so that clients pick",
            "   other nodes.",
            "2. Wait until it holds no job (INFO registered_jobs: 0). A node of ours hands",
            "   its queued jobs to the other nodes at once; a C Disque node gives them only",
            "   when consumers connected to OTHER nodes ask for jobs of those queues. Each",
            "   job goes away once acknowledged: keep consumers running on the others.",
            f"3. CLUSTER FORGET {target.id[:ID_PREFIX] if target.id else '?'}... on every "
            "other node; then CLUSTER RESET SOFT on it, so that it does not rejoin.",
        ]
        if self.parsed.shutdown:
            lines.append("4. SHUTDOWN the node.")
        else:
            lines.append("The node keeps running afterwards (--shutdown stops it).")
        if self.parsed.timeout:
            lines.append(f"If jobs remain after {self.parsed.timeout:g}s, stop before step 3.")
        self.out.panel(f"Removing {target.label} from the cluster", lines)

    # ---- step 1 ----
    def set_leaving(self) -> bool:
        out, target = self.out, self.target
        try:
            reply = target.call("CLUSTER", "LEAVING", "yes")
        except NodeDown as exc:
            self.mine.fail(f"CLUSTER LEAVING failed: {exc}")
            out.error(f"{target.name}: {exc}")
            return False
        if isinstance(reply, ErrorReply):
            text = bytes(reply).decode(errors="replace")
            self.mine.fail(f"CLUSTER LEAVING refused: {text}")
            out.error(f"{target.name}: CLUSTER LEAVING yes: {text}")
            return False
        out.ok(f"{target.name} is now leaving.")
        self.mine.ok("leaving")
        # Informative: the others learn it through the cluster bus in a moment.
        deadline = time.monotonic() + SEEN_LEAVING_WAIT
        pending = [member for member in self.others if member.up]
        while pending and time.monotonic() < deadline:
            still = []
            for member in pending:
                try:
                    seen = any(
                        entry.id == target.id and "leaving" in entry.flags
                        for entry in _view(member)
                    )
                except NodeDown:
                    continue
                if not seen:
                    still.append(member)
            pending = still
            if pending:
                time.sleep(POLL)
        seeing = sum(member.up for member in self.others) - len(pending)
        if pending:
            out.warn(
                f"{seeing} nodes see it as leaving; not yet: "
                f"{', '.join(member.label for member in pending)}"
            )
        else:
            out.ok(f"All {seeing} reachable nodes see it as leaving.")
        return True

    # ---- step 2 ----
    def drain(self) -> bool | None:
        """True: drained; None: the node went away (go on with the others); False:
        timed out (stop here, the node stays leaving)."""
        out, target = self.out, self.target
        remaining = self.poll_jobs()
        if remaining is None:  # gone already: what it held when we asked first
            return self.lost(target.number("registered_jobs"))
        if remaining == 0:
            out.ok(f"{target.label} holds no job.")
            self.mine.ok("no job left")
            return True
        watcher = DrainWatch(remaining)
        timeout = self.parsed.timeout or None
        progress = ProgressView(out, watcher, target.label)
        with progress:
            while True:
                time.sleep(POLL)
                remaining = self.poll_jobs()
                if remaining is None:
                    break
                watcher.update(remaining)
                progress.update()
                if remaining == 0:
                    break
                if watcher.stalled_for() >= STALL_AFTER and not watcher.explained:
                    watcher.explained = True
                    jobs = self.jobs_here(remaining)
                    if jobs is not None and self.only_orphan_acks(jobs, remaining):
                        break
                    self.strays = self.stray_copies(jobs or [])
                    progress.note(self.stall_message(remaining, watcher.stalled_for()))
                if timeout is not None and watcher.elapsed() >= timeout:
                    break
        if remaining is None:
            return self.lost(watcher.remaining)
        if remaining and watcher.explained and self.orphan_acks == remaining:
            out.ok(
                f"Drained: {plural(watcher.total - remaining, 'job')} left {target.label}; "
                f"{plural(remaining, 'acknowledged job')} stay, their garbage collection "
                "waiting on nodes that left the cluster (every other copy is acknowledged): "
                "nothing left to deliver."
            )
            self.mine.ok(f"drained ({remaining} orphan ACKs)")
            return True
        if remaining == 0:
            out.ok(
                f"Drained: {plural(watcher.total, 'job')} left {target.label} in "
                f"{watcher.elapsed():.1f}s."
            )
            self.mine.ok(f"drained {plural(watcher.total, 'job')}")
            return True
        out.error(
            f"{plural(remaining, 'job')} still on {target.label} after {timeout:g}s. "
            "It was not forgotten and stays in leaving state: start consumers on the "
            "other nodes and run this command again, or undo with "
            f"`{target.cli('cluster', 'leaving', 'no')}`."
        )
        if self.strays:
            shown = " ".join(self.strays[:5]) + (" ..." if len(self.strays) > 5 else "")
            out.line(
                f"    Stray copies among them: {len(self.strays)} (no node that owns "
                "the job holds it any more). If your consumers "
                f"processed them, `{target.cli('ackjob', shown)}` ends them."
            )
        self.mine.fail(f"{plural(remaining, 'job')} left after {timeout:g}s")
        return False

    def poll_jobs(self) -> int | None:
        """registered_jobs of the leaving node; None once it is gone (one retry)."""
        for attempt in range(2):
            try:
                fields = flat_info(self.target.text("INFO", "jobs"))
                return int(fields.get("registered_jobs", "0"))
            except (NodeDown, ValueError) as exc:
                self.target.error = str(exc)
                if attempt == 0:
                    time.sleep(0.5)
        return None

    def lost(self, remaining: int | None) -> None:
        self.target_gone = True
        jobs = f" with {plural(remaining, 'job')} still on it" if remaining else ""
        self.out.error(f"{self.target.name} went away while draining{jobs}: {self.target.error}.")
        if remaining:
            self.out.line(
                "    Jobs with copies on other nodes are queued again by them after "
                "their retry time; jobs with a single copy are lost."
            )
        self.out.line("    Going on: the other nodes still have to forget it.")
        self.mine.fail(f"went away while draining: {self.target.error}")
        return None

    def jobs_here(self, remaining: int) -> list[dict[Any, Any]] | None:
        """Every job the leaving node holds, as JSCAN REPLY all's fields, for the
        checks of a stall (only_orphan_acks, stray_copies): only for a few jobs
        (ORPHAN_CHECK_MAX); None when there are more, or a reply is not one."""
        if remaining > ORPHAN_CHECK_MAX:
            return None
        try:
            return [
                dict(zip(job[::2], job[1::2], strict=False))
                for job in jscan(self.target, None, "all", ORPHAN_CHECK_MAX)
            ]
        except (ShortScan, NodeDown, TypeError, ValueError):
            return None

    def only_orphan_acks(self, jobs: list[dict[Any, Any]], remaining: int) -> bool:
        """Whether every job left is acknowledged, and its garbage collection waits
        only on nodes the cluster no longer has (forgotten after they left: Disque
        keeps waiting for them until the job's TTL) or on nodes that hold it
        acknowledged too, or not at all (their own GC may wait on a departed
        node). Such a job is nothing to deliver, nor to deliver twice: the node
        can go. Checked once, on a stall (SHOW on the other nodes it waits on)."""
        if len(jobs) != remaining:  # jobs came or went meanwhile: keep waiting
            return False
        try:
            members = {entry.id for entry in _view(self.target)}
            others = {member.id: member for member in self.others if member.id}
            for fields in jobs:
                if fields.get(b"state") != b"acked":
                    return False
                waiting = set(fields.get(b"nodes-delivered") or []) - set(
                    fields.get(b"nodes-confirmed") or []
                )
                for n in waiting:
                    name = bytes(n).decode()
                    if name in members and not self.acked_or_gone(
                        others.get(name), fields.get(b"id")
                    ):
                        return False
        except (NodeDown, TypeError, ValueError):
            return False
        self.orphan_acks = len(jobs)
        return True

    def stray_copies(self, jobs: list[dict[Any, Any]]) -> list[str]:
        """The jobs held here, not acknowledged, that list neither this node nor any
        node still holding them: copies a C Disque node's federation moved here
        (its receiveYourJobs lists no node), whose owners collected the job, most
        likely after an ACK. Such a copy is queued again at each RETRY, delivered
        again, and never leaves. Checked on a stall (SHOW on the nodes each
        lists); [] when anything is unclear."""
        if not self.target.id:
            return []
        others = {member.id: member for member in self.others if member.id}
        strays: list[str] = []
        try:
            for fields in jobs:
                owners = {bytes(n).decode() for n in fields.get(b"nodes-delivered") or []}
                if fields.get(b"state") == b"acked" or self.target.id in owners:
                    continue
                asked = [others[n] for n in owners if n in others]
                job_id = fields.get(b"id")
                if asked and all(m.call("SHOW", job_id) is None for m in asked):
                    strays.append(bytes(job_id).decode())
        except (NodeDown, TypeError, ValueError):
            return []
        return strays

    @staticmethod
    def acked_or_gone(member: Member | None, job_id: Any) -> bool:
        """Whether that node holds the job acknowledged, or no copy of it."""
        if member is None:
            return False
        reply = member.call("SHOW", job_id)
        if reply is None:
            return True
        if not isinstance(reply, list):
            return False
        return dict(zip(reply[::2], reply[1::2], strict=False)).get(b"state") == b"acked"

    def stall_message(self, remaining: int, stalled: float) -> str:
        queued = queue_lengths(self.target)
        text = f"No job has left {self.target.label} for {stalled:.0f}s. " + (
            "It hands its queued jobs to the other nodes; a job it holds goes once "
            "acknowledged, so keep consumers running on the other nodes."
            if server_kind(self.target.info) == "python"
            else "Jobs leave a leaving C Disque node only when consumers connected to "
            "other nodes ask for them (GETJOB)."
        )
        total = sum(queued.values())
        if queued:
            top = sorted(queued.items(), key=lambda item: -item[1])[:5]
            text += (
                " Queued here: "
                + ", ".join(f"{name} ({count})" for name, count in top)
                + (", ..." if len(queued) > 5 else "")
                + "."
            )
        if remaining > total:
            text += self.not_queued_here(remaining - total)
        if self.strays:
            text += (
                f" Stray copies here: {len(self.strays)}. No node that owns such a job "
                "holds it any more (collected there after an ACK, most likely), so it "
                "comes back at each RETRY and will not leave."
            )
        return text

    def not_queued_here(self, count: int) -> str:
        """What the jobs held here but not queued here wait for, by queue: queued on
        no node (delivered, or waiting for their RETRY or DELAY), or copies of jobs
        queued on another node (waiting.py's scan of every reachable node)."""
        scan = waiting_jobs([self.target, *(m for m in self.others if m.up)])
        here = [w for w in scan.sorted() if self.target.label in w.nodes]
        text = ""
        nowhere = sum(w.jobs for w in here)
        if here:
            shown = "; ".join(
                f"{w.queue} ({w.jobs}"
                + (f", next re-queue in {duration(w.next_ms)}" if w.next_ms is not None else "")
                + ")"
                for w in here[:5]
            )
            text += (
                f" Queued on no node: {shown}{'; ...' if len(here) > 5 else ''}: delivered "
                "and not acknowledged yet, or waiting for their RETRY or DELAY; they go "
                "once acknowledged, or queued again and taken."
            )
        copies = sorted(
            scan.elsewhere.get(self.target.label, {}).items(), key=lambda item: -item[1]
        )
        if copies:
            shown = "; ".join(
                f"{queue} ({n}, queued on {where})" for (queue, where), n in copies[:5]
            )
            text += (
                f" Copies of jobs queued on other nodes: {shown}"
                f"{'; ...' if len(copies) > 5 else ''}: they go when acknowledged there."
            )
        rest = count - nowhere - sum(n for _, n in copies)
        if rest > 0:
            text += (
                f" {rest} more are acknowledged, or changed state while read: they go when "
                "collected."
            )
        if scan.partial:
            text += f" (Not every job was read on {', '.join(scan.partial)}.)"
        return text

    # ---- step 3 ----
    def forget(self) -> None:
        out, target = self.out, self.target
        node_id = target.id or ""
        if not self.target_gone:
            # Nodes may have joined meanwhile: forget it there too.
            try:
                target.view = _view(target)
            except NodeDown:
                pass
            known = {member.id for member in self.others}
            for member in discover(target)[1:]:
                if member.id not in known:
                    self.others.append(member)
                    self.results.append(Result(member, "other"))
        for member in self.others:
            result = self.result_of(member)
            try:
                reply = member.call("CLUSTER", "FORGET", node_id)
                text = bytes(reply).decode(errors="replace") if isinstance(reply, bytes) else ""
                if isinstance(reply, ErrorReply) and not text.startswith("ERR Unknown node"):
                    raise NodeDown(f"CLUSTER FORGET: {text}")
                if any(entry.id == node_id for entry in _view(member)):
                    raise NodeDown("CLUSTER FORGET answered, yet the node is still listed")
            except NodeDown as exc:
                member.error = str(exc)
                result.fail(f"could not forget it: {exc}")
                out.error(f"{member.name}: {exc}")
                continue
            already = isinstance(reply, ErrorReply)
            result.ok("had already forgotten it" if already else "forgot it")
            out.ok(
                f"{member.name} {'had already forgotten' if already else 'forgot'} "
                f"{node_id[:ID_PREFIX]}."
            )
        missed = [member for member in self.others if self.result_of(member).failed]
        if missed:
            out.warn(
                f"Run `CLUSTER FORGET {node_id}` on "
                f"{', '.join(member.label for member in missed)} as soon as possible: "
                "until then they may gossip it back to the others (after 60s)."
            )

    def detach(self) -> None:
        """CLUSTER RESET SOFT on the node once every other node forgot it and it holds
        no job (but acknowledged ones waiting on departed nodes): it forgets its
        peers too, so a restart from its directory does not rejoin the cluster
        (CLUSTER MEET brings it back, when wanted)."""
        out, target = self.out, self.target
        if self.target_gone or any(self.result_of(m).failed for m in self.others):
            out.warn(
                f"{target.label} still lists its peers: started again from its "
                "directory, it would rejoin the cluster."
            )
            return
        left = self.poll_jobs()
        if left is None or left > self.orphan_acks:
            out.warn(f"{target.label} holds jobs again: it keeps its peers' list.")
            return
        try:
            reply = target.call("CLUSTER", "RESET", "SOFT")
        except NodeDown as exc:
            out.warn(f"{target.name}: CLUSTER RESET: {exc}")
            return
        if isinstance(reply, ErrorReply):
            out.warn(f"{target.name}: CLUSTER RESET: {bytes(reply).decode(errors='replace')}")
            return
        self.mine.ok("forgot its peers")
        out.ok(f"{target.label} forgot its peers: restarted, it does not rejoin.")

    # ---- step 4 ----
    def shutdown(self) -> None:
        out, target = self.out, self.target
        if self.target_gone:
            out.warn(f"{target.label} is not running any more: nothing to shut down.")
            return
        try:
            reply = target.call("SHUTDOWN")
        except NodeDown as exc:
            if str(exc) != CLOSED:
                self.mine.fail(f"SHUTDOWN failed: {exc}")
                out.error(f"{target.name}: SHUTDOWN: {exc}")
                return
            reply = None
        if isinstance(reply, ErrorReply):
            text = bytes(reply).decode(errors="replace")
            self.mine.fail(f"SHUTDOWN refused: {text}")
            out.error(f"{target.name}: SHUTDOWN: {text}")
            return
        deadline = time.monotonic() + SHUTDOWN_WAIT
        while accepting(target) and time.monotonic() < deadline:
            time.sleep(POLL)
        if accepting(target):
            self.mine.fail("still accepting connections after SHUTDOWN")
            out.error(
                f"{target.label} still accepts connections {SHUTDOWN_WAIT:g}s after SHUTDOWN."
            )
        else:
            self.mine.ok("shut down")
            out.ok(f"{target.label} shut down.")

    # ---- summary ----
    def finish(self) -> int:
        out, target = self.out, self.target
        rows: list[dict[str, Any]] = []
        for result in self.results:
            member = result.member
            rows.append(
                {
                    "id": member.id if out.mode is Mode.JSON else (member.id or "?")[:ID_PREFIX],
                    "address": member.label,
                    "role": result.role,
                    "result": "; ".join(result.outcome) or "untouched",
                    "ok": not result.failed,
                    "error": member.error if result.failed else None,
                }
            )
        out.table(
            (
                Column("address", "Address"),
                Column("id", "ID"),
                Column("role", "Role"),
                Column("result", "Result"),
            ),
            rows,
            title="Summary",
        )
        failed = any(result.failed for result in self.results)
        if not failed:
            tail = (
                ""
                if self.parsed.shutdown
                else (
                    f" It is still running, out of the cluster: stop it with "
                    f"`{target.cli('shutdown')}`."
                )
            )
            out.ok(f"{target.name} left the cluster.{tail}")
            return 0
        out.error(f"The removal of {target.name} did not complete: see above.")
        return 1


# ---- drain progress ---------------------------------------------------------------------


class DrainWatch:
    """Counts and rates while registered_jobs goes down."""

    def __init__(self, remaining: int) -> None:
        self.started = time.monotonic()
        self.total = remaining
        self.remaining = remaining
        self.last_change = self.started
        self.samples: deque[tuple[float, int]] = deque([(self.started, remaining)])
        self.explained = False

    def update(self, remaining: int) -> None:
        now = time.monotonic()
        if remaining != self.remaining:
            self.last_change = now
            self.explained = False
        self.remaining = remaining
        self.total = max(self.total, remaining)  # jobs may still arrive (replicas)
        self.samples.append((now, remaining))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW:
            self.samples.popleft()

    @property
    def moved(self) -> int:
        return self.total - self.remaining

    def rate(self) -> float:
        (t0, r0), (t1, r1) = self.samples[0], self.samples[-1]
        return max(0.0, (r0 - r1) / (t1 - t0)) if t1 > t0 else 0.0

    def eta(self) -> float | None:
        rate = self.rate()
        return self.remaining / rate if rate > 0 else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def stalled_for(self) -> float:
        return time.monotonic() - self.last_change


class ProgressView:
    """A rich progress bar on a terminal; otherwise a line when the count changes
    (at most once a second)."""

    def __init__(self, out: Output, watch: DrainWatch, address: str) -> None:
        self.out = out
        self.watch = watch
        self.address = address
        self.progress: Any = None
        self.task: Any = None
        self.last_line = 0.0
        self.last_printed: int | None = None

    def __enter__(self) -> ProgressView:
        if self.out.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            watch = self.watch
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(30),
                MofNCompleteColumn(),
                TextColumn("jobs moved", markup=False),
                TextColumn("{task.fields[rate]}", markup=False),
                TextColumn("{task.fields[eta]}", markup=False),
                TimeElapsedColumn(),
                console=self.out.console,
            )
            self.progress.start()
            self.task = self.progress.add_task(
                f"draining {self.address}", total=watch.total, completed=0, rate="", eta=""
            )
        else:
            self._plain(force=True)
        return self

    def update(self) -> None:
        watch = self.watch
        if self.progress is not None:
            stalled = watch.stalled_for() >= STALL_AFTER
            description = (
                f"waiting for consumers ({watch.stalled_for():.0f}s idle)"
                if stalled
                else f"draining {self.address}"
            )
            eta = watch.eta()
            self.progress.update(
                self.task,
                total=watch.total,
                completed=watch.moved,
                description=description,
                rate=f"{watch.rate():.1f} jobs/s",
                eta=f"ETA {_duration(eta)}" if eta is not None else "ETA -",
            )
        else:
            self._plain()

    def note(self, text: str) -> None:
        if self.progress is not None:
            from rich.text import Text

            self.progress.console.print(Text(text, style="yellow"))
        else:
            self.out.line(f"    {text}")

    def _plain(self, force: bool = False) -> None:
        watch = self.watch
        now = time.monotonic()
        changed = watch.remaining != self.last_printed
        if not force and not (
            changed and (now - self.last_line >= PLAIN_EVERY or watch.remaining == 0)
        ):
            return
        eta = watch.eta()
        self.out.line(
            f"    jobs left: {watch.remaining}/{watch.total}, moved {watch.moved}, "
            f"{watch.rate():.1f} jobs/s, ETA "
            f"{_duration(eta) if eta is not None else '-'}"
        )
        self.last_line = now
        self.last_printed = watch.remaining

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.update()
            self.progress.stop()
        elif self.last_printed != self.watch.remaining:
            self._plain(force=True)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _view(member: Member) -> list[ViewEntry]:
    return parse_nodes(member.text("CLUSTER", "NODES"))
