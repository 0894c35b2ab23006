"""The node: listeners, command dispatch, the cron, stats and shutdown.

One process, one event loop: everything that touches jobs runs on the loop
thread, so there are no locks. The cron runs ``hz`` times a second and does
the periodic work (job timers, memory, idle queues, client timeouts,
instantaneous stats); blocked-client timeouts use precise loop timers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import time
import traceback
from typing import Any, Final

from disque_server import jobs, metrics, resp, restart, tls
from disque_server.aof import AOF
from disque_server.client import Client, buffered_bytes
from disque_server.clock import command_clock, now_ms
from disque_server.cluster import Cluster
from disque_server.cluster.events import ClusterJobEvents
from disque_server.collector import Collector
from disque_server.commands import (
    HOT_ACKJOB,
    HOT_ADDJOB,
    HOT_GETJOB,
    Command,
    addjob,
    build_table,
    commands_processed,
    getjob,
    jobs_by_id,
)
from disque_server.config import Config, ConfigError
from disque_server.eviction import Eviction
from disque_server.hooks import Hooks
from disque_server.job import CtimeClock
from disque_server.jobs.blocking import BlockedGetJob
from disque_server.jobs.queue import Queue
from disque_server.latency import LatencyMonitor
from disque_server.listener import Listener, as_protocol, listening_sockets
from disque_server.log import Log
from disque_server.memory import EVICT, Memory, without_peak_capacity
from disque_server.output_limits import OutputLimits
from disque_server.resp import LEAVING_ERROR
from disque_server.slowlog import SlowLog
from disque_server.state import NodeState
from disque_server.stats import Stats
from disque_server.watchdog import Watchdog

# Under this slowlog-log-slower-than (seconds), every command is timed on its own,
# not in a streak of fast commands (Server.end_streak).
STREAK_TIMING_FLOOR_S: Final = 0.001
# While its failure detector has a suspect or reports to count, an idle node's
# cron runs at least at hz / IDLE_CRON_SLOWDOWN (Server.cron_period).
IDLE_CRON_SLOWDOWN: Final = 4
# A slow tick (idle or quiet node) comes when the failure detector or a job timer
# next has work, at most this far apart (Server.cron_period) ...
SLOW_TICK_MAX_S: Final = 1.0
# ... and may come this much late, so that a wake-up for the bus runs it
# (Server.schedule_cron, run_cron_now): half a tick at the default hz.
SLOW_TICK_SLACK_S: Final = 0.05
# A slow tick moved by less than this stays where it is (reschedule_slow_tick).
RESCHEDULE_MIN_S: Final = 0.01


def slowlog_threshold_s(threshold_us: int) -> float:
    """slowlog-log-slower-than in seconds, as dispatch compares it (negative: never)."""
    return threshold_us / 1e6 if threshold_us >= 0 else float("inf")


def cron_hz(period: float) -> int:
    """The cron's rate, in ticks a second (at least 1), for a period in seconds."""
    return max(1, round(1 / period))


class NodeHooks(Hooks):
    """Where the hooks of the modules below the server go on (hooks.Hooks): GETJOB's
    reply to a blocked client, the server's own dispatch, reply flushing and shutdown. (A job's events go to the cluster and
    the AOF without the server: cluster.events.)"""

    def __init__(self, server: Server) -> None:
        self.server = server

    def serve_blocked(self, client: Client, q: Queue) -> None:
        getjob.serve_blocked(client, q)

    def client_buffers(self) -> int:
        return buffered_bytes(self.server.clients)

    def requests_started(self) -> None:
        self.server.command_start = command_clock()

    def request(self, client: Client, argv: list[bytes]) -> None:
        self.server.dispatch(client, argv)

    def requests_done(self) -> None:
        server = self.server
        if server.streak_calls:
            server.end_streak()

    def replies_ready(self, client: Client) -> None:
        self.server.flush_later(client)

    def timer_due_sooner(self, at: int) -> None:
        self.server.tick_sooner(at)

    def bus_read(self) -> None:
        server = self.server
        due = server.cron_due_at
        if due and due <= time.monotonic():  # a slow tick, run in this wake-up
            server.run_cron_now()

    def next_tick_changed(self) -> None:
        self.server.reschedule_slow_tick()

    def leaving_started(self) -> None:
        """Clients blocked in GETJOB must go elsewhere."""
        for client in list(self.server.clients):
            if isinstance(client.blocked, BlockedGetJob):
                client.reply(LEAVING_ERROR)
                client.unblock()
                client.flush()

    def shutdown_requested(self, exit_code: int) -> None:
        self.server.request_shutdown(exit_code)


class Server(NodeState):
    """One Disque node: builds the pieces the others share (state.NodeState) and runs
    them: listeners, dispatch, the cron, shutdown."""

    def __init__(self, config: Config, log: Log) -> None:
        self.config = config
        self.log = log
        self.loop = asyncio.get_event_loop()
        self.start_time = time.time()
        self.clock_s = self.start_time  # time.time() as of the last cron tick
        self.run_id = os.urandom(20).hex()
        self.stats = Stats()
        self.clients = {}
        self.clients_to_flush: list[Client] = []  # (Client.flush_soon)
        self.monitors = {}
        self.ctime_clock = CtimeClock()
        self.hooks = NodeHooks(self)  # before the layers that call it
        self.memory = Memory(config)
        # What a job's life tells the cluster and the AOF (both built below).
        self.job_events = ClusterJobEvents()
        self.jobs, self.queues, self.acks = jobs.build(
            self.hooks, self.job_events, self.memory, log, self.loop
        )
        self.cluster = self.job_events.cluster = Cluster(self)
        self.commands = build_table()
        self.command_list = list(dict.fromkeys(self.commands.values()))
        self.slowlog = SlowLog(config["slowlog-max-len"])
        # Read by every command: kept here, not looked up in the config each time.
        self.slowlog_threshold_s = slowlog_threshold_s(config["slowlog-log-slower-than"])
        self.slow_s = self.slowlog_threshold_s  # the least of it and the watchdog period
        self.command_start = 0.0  # command_clock() when the command being run started
        # The streak of fast commands being timed as one (see end_streak): the command,
        # how many, and the last one's client and arguments (for the slowlog).
        self.streak_cmd: Command | None = None
        self.streak_calls = 0
        self.streak_client: Client | None = None
        self.streak_argv: list[bytes] = []
        self.time_streaks = True  # False when the slowlog wants every command's own time
        self.update_slow_threshold()
        self.servers: list[asyncio.AbstractServer | Listener] = []
        self.shutdown_event = asyncio.Event()
        self.exit_code = 0
        self.shutting_down = False
        self._last_second = 0
        self._cron_expected = 0.0  # (monotonic) when the tick's timer fires
        self._cron_timer: asyncio.Handle | None = None
        # (monotonic) from when a wake-up for the bus runs a slow tick; 0: none.
        self.cron_due_at = 0.0
        self.collector = Collector()
        self.latency = LatencyMonitor()
        self.aof = self.job_events.aof = AOF(config, log, self.loop, self.jobs, self.queues)
        self.eviction = Eviction(config, self.memory, self.jobs, self.queues, self.aof, self.hooks)
        self.watchdog = Watchdog()
        self.output_limits = OutputLimits()
        self.unix_server: asyncio.AbstractServer | None = None
        config.listeners.append(self.on_config_change)

    # ---- life cycle ------------------------------------------------------------
    async def start(self) -> None:
        self.load_data()
        hosts = self.bind_addresses()
        # The bus (and metrics) first: once the client port answers, the whole node is up, so
        # whoever waits for PING (scripts, tests, supervisors) may talk to the bus.
        await self.cluster.start_bus(hosts)
        if self.config["metrics-port"]:
            self.servers += await metrics.start(self, hosts)
        # The TLS files are read before any client port listens: a node that cannot
        # start must never have answered a PING (its error path runs the event loop).
        tls_context = tls.server_context(self.config) if self.config["tls-port"] else None
        if self.config["unixsocket"]:  # before the port: once PING answers, it is there too
            await self.listen_unix(self.config["unixsocket"], int(self.config["unixsocketperm"], 8))
        await self.listen(hosts, self.config["port"])
        if tls_context is not None:
            await self.listen(hosts, self.config["tls-port"], tls_context)
            self.log.notice("Accepting TLS connections on port %d", self.config["tls-port"])
        self.log.notice(
            "Ready to accept connections on port %d (cluster bus on port %d)",
            self.config["port"],
            self.cluster.bus_port,
        )
        self.schedule_cron(self.cron_period(self.idle()))
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.loop.add_signal_handler(sig, self.on_signal, sig)
            except (NotImplementedError, RuntimeError):
                pass

    async def listen(
        self, hosts: list[str | None], port: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        for host in hosts:
            try:
                socks = listening_sockets(host, port, self.config["tcp-backlog"])
            except OSError:
                if host == "::1":  # no IPv6 loopback on this machine: fine
                    continue
                raise
            for sock in socks:
                self.servers.append(
                    Listener(
                        self.loop,
                        sock,
                        lambda: as_protocol(Client(self)),
                        ssl_context,
                        self.log.warning,
                    )
                )

    async def listen_unix(self, path: str, perm: int) -> None:
        """unixsocket: as Disque, a stale file is removed first, and unixsocketperm
        (octal, 0: the umask decides) is applied to the socket file."""
        try:
            if os.path.exists(path) and not os.path.isdir(path):
                os.unlink(path)
            self.unix_server = await self.loop.create_unix_server(
                lambda: as_protocol(Client(self)), path, backlog=self.config["tcp-backlog"]
            )
            if perm:
                os.chmod(path, perm)
        except OSError as exc:
            raise ConfigError(f"Opening Unix socket {path}: {exc.strerror or exc}") from None
        self.servers.append(self.unix_server)
        self.log.notice("The server is now ready to accept connections at %s", path)

    def remove_unix_socket(self) -> None:
        if self.unix_server is not None:
            try:
                os.unlink(self.config["unixsocket"])
            except OSError:
                pass

    def load_data(self) -> None:
        """Load the AOF (with appendonly, or once for a controlled restart), then open it."""
        config = self.config
        enqueue_once = config["aof-enqueue-jobs-once"]
        if config["appendonly"] or enqueue_once:
            clean = restart.take_mark(self.aof.path)
            if clean:
                self.log.notice("The AOF is a clean stop's snapshot: queues and delays restored")
            self.aof.load(restart.Restore(enqueue_once, clean, self.cluster.myself.id))
        if enqueue_once:
            config.values["aof-enqueue-jobs-once"] = False
            if config.file:
                try:
                    config.rewrite()
                except OSError as exc:
                    self.log.warning("Could not rewrite the config after loading queues: %s", exc)
            self.log.notice("Queues restored from the AOF; aof-enqueue-jobs-once is off again")
        if config["appendonly"]:
            self.aof.open()

    def bind_addresses(self) -> list[str | None]:
        bind = self.config["bind"].split()
        if bind:
            return bind
        if self.config["protected-mode"] and not self.config["requirepass"]:
            self.log.warning(
                "Protected mode: no 'bind' and no 'requirepass' are set, so the "
                "node listens on the loopback interface only. Set a password "
                "with 'requirepass' or addresses with 'bind' to accept remote "
                "clients."
            )
            return ["127.0.0.1", "::1"] if socket.has_ipv6 else ["127.0.0.1"]
        return [None]  # every interface

    async def serve_forever(self) -> int:
        await self.start()
        await self.shutdown_event.wait()
        await self.stop()
        return self.exit_code

    def on_signal(self, sig: int) -> None:
        if self.shutdown_event.is_set():
            self.log.warning("Second signal received: exiting now.")
            os._exit(1)
        self.log.warning("Received %s, scheduling shutdown...", signal.Signals(sig).name)
        self.request_shutdown()

    def request_shutdown(self, exit_code: int = 0) -> None:
        self.exit_code = exit_code
        self.shutting_down = True  # from now on no command runs: the state is final
        self.shutdown_event.set()

    async def stop(self) -> None:
        """Shut down in a fixed order: stop listening, close clients, save state."""
        self.log.warning("User requested shutdown...")
        if self._cron_timer is not None:
            self._cron_timer.cancel()  # (a tick after the snapshot would start a rewrite)
            self._cron_timer = None
        for srv in self.servers:
            srv.close()
        self.remove_unix_socket()
        self.watchdog.stop()
        for client in list(self.clients):
            client.flush()
            client.kill()
        self.save_for_restart()
        self.aof.close()
        self.aof.kill_rewrite()
        self.cluster.close()
        self.cluster.save_config()
        pidfile = self.config["pidfile"]
        if pidfile:
            try:
                os.unlink(pidfile)
            except OSError:
                pass
        self.log.warning("Disque is now ready to exit, bye bye...")

    def save_for_restart(self) -> None:
        """With appendonly (or after SHUTDOWN REWRITE-AOF), a snapshot of every job
        and its mark (restart.py), so the next start queues what was queued. Written
        now, past the last bus message: the state is final."""
        aof = self.aof
        if aof.state == "off" and not aof.rewritten_for_shutdown:
            return
        if not aof.rewrite_for_shutdown():
            return  # (logged): the next start keeps Disque's rule
        aof.close()
        try:
            restart.write_mark(aof.path)
        except OSError as exc:
            self.log.warning("Could not mark the AOF as a clean stop's snapshot: %s", exc)

    # ---- dispatch --------------------------------------------------------------
    def dispatch(self, client: Client, argv: list[bytes]) -> None:
        if self.shutting_down:
            client.reply(b"-ERR the node is shutting down\r\n")
            return
        name = argv[0]
        cmd = client.last_cmd
        if cmd is None or name is not client.last_cmd_name:
            # (The reader gives the same bytes object for the same name, request
            # after request: then the table is not looked at, nor the name hashed.)
            cmd = self.commands.get(name)
            if cmd is None:
                cmd = self.commands.get(name.lower())
                if cmd is None:
                    if name.lower() == b"quit":
                        client.reply(resp.OK)
                        client.close_after_reply()
                        return
                    client.reply_error(f"ERR unknown command '{name.decode(errors='replace')}'")
                    return
            client.last_cmd, client.last_cmd_name = cmd, name  # (as Disque: before the checks)
        if not cmd.min_argc <= len(argv) <= cmd.max_argc:
            client.reply_error(f"ERR wrong number of arguments for '{cmd.name}' command")
            return
        if not client.authenticated and not cmd.noauth:
            client.reply(b"-NOAUTH Authentication required.\r\n")
            return
        if self.aof.last_write_error and cmd.write:
            client.reply_error(
                f"MISCONF Errors writing to the AOF file: {self.aof.last_write_error}"
            )
            return
        if cmd.denyoom and self.memory.level >= EVICT and not self.eviction.room_for_command():
            client.reply(b"-OOM command not allowed when used memory > 'maxmemory'.\r\n")
            self.stats.count_refusal(cmd.name_bytes, b"OOM")
            return
        if self.monitors:
            self.feed_monitors(client, argv)
        in_streak = cmd.fast and self.time_streaks
        if self.streak_calls and (not in_streak or cmd is not self.streak_cmd):
            self.end_streak()  # (the clock read that starts this command)
        try:
            hot = cmd.hot
            if hot == HOT_ACKJOB:
                jobs_by_id.ackjob_command(client, argv)
            elif hot == HOT_GETJOB:
                getjob.getjob_command(client, argv)
            elif hot == HOT_ADDJOB:
                addjob.addjob_command(client, argv)
            else:
                cmd.handler(client, argv)
        except Exception as exc:  # a bug must cost one reply, never the node
            self.log.warning("Error in command %s: %s\n%s", cmd.name, exc, traceback.format_exc())
            client.reply_error(f"ERR internal error while running '{cmd.name}': {exc}")
        cmd.calls += 1  # (total_commands_processed is their sum)
        if in_streak:
            self.streak_cmd, self.streak_client, self.streak_argv = cmd, client, argv
            self.streak_calls += 1
            return
        # One clock read per command: its time runs from the end of the one before in
        # the same pass (or the start of the pass), so it includes reading its request.
        # Wall-clock time, as Disque's ustime(): a C double from librt, no float object
        # and no call through the time module (7% of a pipelined ACKJOB's CPU).
        now = command_clock()
        elapsed = max(now - self.command_start, 0.0)  # (a clock set back)
        self.command_start = now
        cmd.usec += elapsed
        if elapsed >= self.slow_s:
            self.command_was_slow(client, cmd, argv, elapsed)

    def end_streak(self) -> None:
        """Time a streak of fast commands: the same command, one after another in a
        client's pass (a pipeline of ACKJOBs), takes one clock read for the whole
        streak, not one each (the clock was 11% of a pipelined ACKJOB's CPU, where a
        command costs little more than reading it). Each is charged an equal share of
        the streak's time in INFO commandstats; the slowlog gets the last one when that
        share is slow, the watchdog the streak when it held the loop too long. A
        streak ends at another command and at the end of the pass."""
        now = command_clock()
        elapsed = max(now - self.command_start, 0.0)
        self.command_start = now
        cmd, calls, client = self.streak_cmd, self.streak_calls, self.streak_client
        argv = self.streak_argv
        self.streak_cmd, self.streak_calls, self.streak_client, self.streak_argv = None, 0, None, []
        if cmd is None or client is None:
            return
        cmd.usec += elapsed
        if elapsed >= self.slow_s:
            self.command_was_slow(client, cmd, argv, elapsed / calls, elapsed)

    def flush_later(self, client: Client) -> None:
        if not self.clients_to_flush:
            self.loop.call_soon(self.flush_clients)
        self.clients_to_flush.append(client)

    def flush_clients(self) -> None:
        """The replies of the event-loop pass, client by client."""
        clients, self.clients_to_flush = self.clients_to_flush, []
        for client in clients:
            client.flush_due = False
            client.flush()

    def feed_monitors(self, client: Client, argv: list[bytes]) -> None:
        now = time.time()
        args = " ".join(
            '"' + a.decode("latin-1").encode("unicode_escape").decode().replace('"', '\\"') + '"'
            for a in argv
        )
        line = f"+{now:.6f} [0 {client.addr}] {args}\r\n".encode()
        for mon in list(self.monitors):
            if mon is not client:
                mon.reply(line)
                mon.flush()

    def command_was_slow(
        self, client: Client, cmd: Command, argv: list[bytes], elapsed: float, held: float = -1.0
    ) -> None:
        """Slowlog and watchdog: ``elapsed`` is the command's time, ``held`` how long
        the event loop was held (a streak's whole time; the command's when not given)."""
        if elapsed >= self.slowlog_threshold_s:
            self.slowlog.add(argv, elapsed)
        if held < 0:
            held = elapsed
        period = self.config["watchdog-period"]
        if period and held * 1000 >= period:
            # The watchdog's stack trace shows the interpreted frames only: compiled
            # (mypyc) functions have none. Name the command that held the loop.
            handler = getattr(cmd.handler, "__name__", cmd.name)
            self.log.warning(
                "--- WATCHDOG: the event loop was held %d ms by %s (%s, client %s) ---",
                int(held * 1000),
                handler,
                cmd.name,
                client.addr,
            )

    def update_slow_threshold(self) -> None:
        period = self.config["watchdog-period"]
        watchdog_s = period / 1000 if period else float("inf")
        self.slow_s = min(self.slowlog_threshold_s, watchdog_s)
        # A slowlog that logs commands of a millisecond or less wants each one's time.
        self.time_streaks = self.slowlog_threshold_s > STREAK_TIMING_FLOOR_S

    # ---- cron ------------------------------------------------------------------------
    def schedule_cron(self, period: float) -> None:
        """The next tick in ``period`` seconds. A slow one (idle, quiet: longer than 1
        / hz) may come SLOW_TICK_SLACK_S later: a bus message read after its
        time runs it then (run_cron_now), in a wake-up the process had anyway. On
        this kind of machine a wake-up costs ~140 us of CPU, the idle tick's work
        ~2 us: at 100 nodes under load, the 99 quiet ones' own ticks were about a
        microsecond of CPU per job."""
        now = time.monotonic()
        late = SLOW_TICK_SLACK_S if period > 1 / self.config["hz"] else 0.0
        self._cron_expected = now + period + late
        self._cron_timer = self.loop.call_later(period + late, self.cron)
        self.cron_due_at = now + period if late else 0.0
        # A job timer due before this tick brings it forward (tick_sooner).
        self.jobs.next_tick = now_ms() + int((period + late) * 1000) if late else 0

    def tick_sooner(self, at: int) -> None:
        """The next tick at ``at`` (ms): a job's timer is due before the slow tick an
        idle or quiet node had set (once a slow tick: Jobs.next_tick)."""
        delay = max(at - now_ms(), 0) / 1000
        if self._cron_timer is None or time.monotonic() + delay >= self._cron_expected:
            return
        self._cron_timer.cancel()
        self._cron_expected = time.monotonic() + delay
        self._cron_timer = self.loop.call_later(delay, self.cron)
        self.cron_due_at = min(self.cron_due_at, self._cron_expected)

    def reschedule_slow_tick(self) -> None:
        """What a slow tick was set from changed (hooks.next_tick_changed): it moves
        to the time cron_period gives now. Later, when the probe it waited for is
        answered, so that an idle node wakes about once a protocol period, not
        twice; sooner, when the detector has a suspect or reports to count, or a
        client connected."""
        timer = self._cron_timer
        if timer is None or not self.cron_due_at:
            return  # (no slow tick set: the full rate, or the tick is running)
        idle = self.idle()
        slow = idle or self.quiet()  # (else: a job timer may have set it, never later)
        period = self.cron_period(idle)
        at = time.monotonic() + period
        due = self.cron_due_at
        if at < due - RESCHEDULE_MIN_S or (slow and at > due + RESCHEDULE_MIN_S):
            timer.cancel()
            self.schedule_cron(period)

    def run_cron_now(self) -> None:
        """A bus message read after a slow tick's time (hooks.bus_read): the tick
        runs in this wake-up (next in the loop's queue), not in one of its own
        (schedule_cron)."""
        if self._cron_timer is not None:
            self._cron_timer.cancel()
        self.cron_due_at = 0.0
        self._cron_expected = time.monotonic()  # (on time: not a stall)
        self.stats.cron_ticks_coalesced += 1
        self._cron_timer = self.loop.call_soon(self.cron)

    def cron_period(self, idle: bool, now: int = 0) -> float:
        """Seconds to the next tick: 1 / hz, or on an idle node (no client
        connected, no job registered) when the failure detector next has work
        (cluster/detector.py: a probe a protocol period), at most SLOW_TICK_MAX_S
        away. An idle node's cron has only the cluster bus to look after, and each
        wake-up of the process costs far more than the tick's work: in an idle
        cluster of 50 nodes the cron was a third of each node's CPU. While the
        detector has more under way (a suspect, reports) the tick comes at least
        twice a protocol period, at most IDLE_CRON_SLOWDOWN / hz apart. A client
        connecting brings the full rate back at once (reschedule_slow_tick;
        replies never wait for the cron). An idle tick skips the work of jobs and
        clients (Server.cron).

        A quiet node (jobs, but no client connected and nothing in flight: most
        nodes of a large cluster, holding copies of jobs added elsewhere) ticks as
        slowly, but wakes when its first job timer is due (``now``: this tick's
        clock, ms). A timer set meanwhile (a job added, delivered, replicated
        here) that is due before the slow tick brings the tick forward
        (tick_sooner)."""
        period = 1 / self.config["hz"]
        if not idle and not self.quiet():
            return period
        now = now or now_ms()
        # (The link checks, once a period or a second, run at whichever tick comes.)
        due = self.cluster.detector.next_due()
        if due:
            slow = max(period, min(SLOW_TICK_MAX_S, (due - now) / 1000))
        else:  # (twice a period: a probe's answer is due at its end, the others asked at half)
            at_most = self.cluster.detector.period / 2000
            slow = max(period, min(period * IDLE_CRON_SLOWDOWN, at_most))
        if not idle:
            awake = self.jobs.first_awake()
            if awake:
                slow = min(slow, max(period, (awake - now) / 1000))
        if self.aof.fsync_pending:  # (appendfsync everysec: a second after the last)
            slow = min(slow, max(period, self.aof.last_fsync + 1 - time.monotonic()))
        return slow

    def idle(self) -> bool:
        """No client connected, no job registered: the cron has only the bus to do."""
        return not self.clients and not len(self.jobs)

    def quiet(self) -> bool:
        """Jobs, but no client connected, no replication in flight: nothing but the
        jobs' timers (Jobs.first_awake, those set since the last tick included)
        and the bus to do. A job a REPLJOB brings sets a timer, most often far
        off: it leaves the node quiet (it used to make each answered probe move
        the slow tick to 1 / hz, on every replica of a busy cluster). A leaving
        node is not quiet: its tick hands its queued jobs over (federation)."""
        return not self.clients and not self.cluster.replications and not self.cluster.leaving

    def cron(self) -> None:
        # This tick's timer has fired: a timer set during the tick must not start a
        # second chain of ticks (tick_sooner); schedule_cron sets both again.
        self._cron_timer = None
        if self.shutting_down:
            return  # the state is final: no AOF rewrite, no timer (no next tick)
        self.cron_due_at = 0.0
        self.jobs.next_tick = 0
        self.stats.cron_ticks += 1
        self.latency.record_stall(
            int((time.monotonic() - self._cron_expected) * 1000),
            self.config["latency-monitor-threshold"],
        )
        idle = self.idle()  # (once a tick: the work follows from it, and the period)
        period = 1 / self.config["hz"]
        try:
            self.clock_s = time.time()
            now = int(self.clock_s * 1000)
            if not idle:  # (idle: no job to process or count, no client to limit)
                self.jobs.process_due(now)
                self.jobs.refresh_memory()
                self.output_limits.enforce(
                    self.clients, self.config["client-output-buffer-limit"], self.log
                )
            self.cluster.cron(now)
            self.collector.cron()
            self.aof.cron()
            if not idle:  # (idle: no command runs)
                self.stats.sample(commands_processed(self.command_list))
            if now // 1000 != self._last_second:
                self._last_second = now // 1000
                self.once_per_second()
            period = self.cron_period(idle, now)
            self.watchdog.tick(self.config["watchdog-period"], cron_hz(period), self.log.stream)
        except Exception:
            self.log.warning("Error in cron:\n%s", traceback.format_exc())
        finally:
            self.schedule_cron(period)

    def once_per_second(self) -> None:
        self.eviction.sample_buffers()
        self.eviction.evict_if_needed()
        self.queues.evict_idle(self.config["queue-max-idle-time"])
        self.release_peak_capacity()
        timeout = self.config["timeout"]
        if timeout:
            limit = time.time() - timeout
            for client in list(self.clients):
                if client.last_interaction < limit and not client.blocked and not client.monitor:
                    self.log.verbose("Closing idle client %s", client.addr)
                    client.kill()

    def release_peak_capacity(self) -> None:
        """Tables keyed by job, queue or client, emptied after a burst, give back
        the memory of their peak (a dict keeps it until it grows again)."""
        self.jobs.buckets = without_peak_capacity(self.jobs.buckets)
        self.queues.by_name = without_peak_capacity(self.queues.by_name)
        self.acks.waits = without_peak_capacity(self.acks.waits)
        self.cluster.replications = without_peak_capacity(self.cluster.replications)
        self.clients = without_peak_capacity(self.clients)

    def on_config_change(self, name: str, value: Any) -> None:
        """CONFIG SET of ``name`` (``value`` of the parameter's type, as Config checked)."""
        if name == "slowlog-log-slower-than":
            self.slowlog_threshold_s = slowlog_threshold_s(int(value))
            self.update_slow_threshold()
        elif name == "loglevel":
            self.log.set_level(str(value))
        elif name == "maxmemory":
            self.jobs.refresh_memory()
            self.eviction.evict_if_needed()
        elif name == "watchdog-period":  # armed now, not at the next tick
            self.watchdog.tick(int(value), cron_hz(self.cron_period(self.idle())), self.log.stream)
            self.update_slow_threshold()
        elif name == "appendonly":
            if value:
                self.aof.enable()
            else:
                self.aof.disable()
        elif name == "slowlog-max-len":
            self.slowlog.resize(int(value))
