"""disque_server: a Disque 1.0-rc1 compatible job queue node, in Python.

Module map, bottom to top: a module imports only those below it (and those
of its own package); what a module below server.py calls above it is a
method of ``hooks.Hooks``, which ``server.NodeHooks`` carries on to the layer
that acts on it (tests/unit/test_import_order.py holds the order of the
imports, tests/unit/test_layers.py checks the calls made at run time).

- ``clock``, ``log``, ``config``, ``tls``
- ``resp``      RESP: replies, bus messages and AOF records; request framing
- ``job``       the Job object, job IDs, states, SHOW rendering, its fields
- ``serialize`` a job as Disque's bytes (its serializeJob): the AOF's LOADJOB records
- ``stats``, ``slowlog``, ``latency``: the counters, SLOWLOG's entries, the loop's stalls
- ``hooks``     what the modules below the server call above them (the events)
- ``memory``    maxmemory accounting: used memory and its level
- ``queue``     queues: ordered jobs, blocked clients, pause, stats
- ``registry``  the jobs registered here: lookup, awake timers, the job state machine
- ``blocking``  why a client waits, and what stopping undoes
- ``aof``       the append-only file (``check_aof``: its checker)
- ``eviction``  what maxmemory frees, and room for a command (``memory`` counts)
- ``ack``       acknowledgements, ACKJOB replies held for the GC (the cluster's GC: hooks)
- ``collector``, ``output_limits``, ``watchdog``: what the cron runs
- ``client``    one client connection: its requests, replies, blocking
- ``cluster``   this node's view of the cluster: bus, replication, re-queue, GC,
  federation; ``cluster.clustermsg``: Disque's own binary bus message (for mixed
  clusters; not wired in yet)
- ``commands``  one module per command family (``addjob``, ``getjob``, ``jobs_by_id``:
  the commands naming jobs by ID, ...), above the client and the cluster: ADDJOB calls
  ``cluster.replication`` itself; ``commands.build_table``
- ``metrics``   the Prometheus endpoint (it reads all of the above)
- ``server``    the node: builds and wires the rest (``NodeHooks``), listeners,
  command dispatch, the cron, shutdown
- ``main``      command line: ``disque-server [conf] [--directive value ...]``
"""

import platform

DISQUE_VERSION = "1.0-rc1"
__version__ = "0.1.0"

# Which build runs: mypyc compiles every module of the node (setup.py) to a C
# extension, whose __file__ is the extension's; the pure-Python build's is a .py.
BUILD = "pure" if __file__.endswith((".py", ".pyc")) else "mypyc"
BUILD_ID = f"{platform.python_implementation().lower()}-{platform.python_version()}-{BUILD}"
