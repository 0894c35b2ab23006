"""CLUSTER subcommands: MEET NODES INFO MYID FORGET RESET LEAVING SAVECONFIG."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server import resp
from disque_server.commands.args import parse_ll
from disque_server.resp import bulk

if TYPE_CHECKING:
    from disque_server.client import Client

WRONG: Final = "ERR Wrong CLUSTER subcommand or number of arguments"


def cluster_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    handler = SUBCOMMANDS.get((sub, len(argv)))
    if handler is None:
        c.reply_error(WRONG)
        return
    handler(c, argv)


def cluster_meet(c: Client, argv: list[bytes]) -> None:
    """CLUSTER MEET ip port [bus-port]: the bus port as Redis 7 (beyond Disque), for
    a node whose bus is not at port + 10000 (cluster-port, NAT)."""
    ip, port_arg = argv[2].decode(errors="replace"), argv[3]
    port = parse_ll(port_arg)  # getLongLongFromObject, as Disque
    if port is None:
        c.reply_error(f"ERR Invalid TCP port specified: {port_arg.decode(errors='replace')}")
        return
    address = f"{ip}:{port_arg.decode(errors='replace')}"
    if len(argv) == 5:
        bus_port = parse_ll(argv[4])
        if bus_port is None:
            c.reply_error(f"ERR Invalid bus port specified: {argv[4].decode(errors='replace')}")
            return
        address += f"@{argv[4].decode(errors='replace')}"
        valid = 0 < port <= 65535 and 0 < bus_port <= 65535
    else:
        bus_port = port + 10000
        valid = 0 < port <= 65535 - 10000  # clusterStartHandshake: the bus port must exist too
    if not valid:
        c.reply_error(f"ERR Invalid node address specified: {address}")
        return
    error = c.server.cluster.meet(ip, port, bus_port)
    if error:
        c.reply_error(error)
    else:
        c.reply(resp.OK)


def cluster_nodes(c: Client, argv: list[bytes]) -> None:
    c.reply(bulk(c.server.cluster.nodes_description().encode()))


def cluster_info(c: Client, argv: list[bytes]) -> None:
    c.reply(bulk(c.server.cluster.info().encode()))


def cluster_myid(c: Client, argv: list[bytes]) -> None:
    c.reply(bulk(c.server.cluster.myself.id))


def cluster_forget(c: Client, argv: list[bytes]) -> None:
    cluster = c.server.cluster
    node_id = argv[2]
    if len(node_id) != 40:
        c.reply_error("ERR Invalid node identifier")
    elif node_id == cluster.myself.id:
        c.reply_error("ERR I tried hard but I can't forget myself...")
    elif node_id not in cluster.nodes:
        c.reply_error(f"ERR Unknown node {node_id.decode(errors='replace')}")
    else:
        cluster.forget(node_id)
        c.reply(resp.OK)


def cluster_reset(c: Client, argv: list[bytes]) -> None:
    kind = argv[2].lower() if len(argv) == 3 else b"soft"
    if kind not in (b"hard", b"soft"):
        c.reply_error("ERR Syntax error, try CLUSTER RESET [SOFT|HARD]")
        return
    c.server.cluster.reset(hard=kind == b"hard")
    c.reply(resp.OK)


def cluster_leaving(c: Client, argv: list[bytes]) -> None:
    cluster = c.server.cluster
    if len(argv) == 2:
        c.reply(b"+yes\r\n" if cluster.leaving else b"+no\r\n")
        return
    arg = argv[2].lower()
    if arg not in (b"yes", b"no"):
        c.reply_error("ERR Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'")
        return
    cluster.set_leaving(arg == b"yes")
    c.reply(resp.OK)


def cluster_saveconfig(c: Client, argv: list[bytes]) -> None:
    c.server.cluster.save_config()
    c.reply(resp.OK)


SUBCOMMANDS: Final = {
    (b"meet", 4): cluster_meet,
    (b"meet", 5): cluster_meet,
    (b"nodes", 2): cluster_nodes,
    (b"info", 2): cluster_info,
    (b"myid", 2): cluster_myid,
    (b"forget", 3): cluster_forget,
    (b"reset", 2): cluster_reset,
    (b"reset", 3): cluster_reset,
    (b"leaving", 2): cluster_leaving,
    (b"leaving", 3): cluster_leaving,
    (b"saveconfig", 2): cluster_saveconfig,
}
