"""disque_server: a Disque 1.0-rc1 compatible job queue node, in Python.

Module map (one concept per module, named after Disque's own):

- ``main``      command line: ``disque-server [conf] [--directive value ...]``
- ``config``    directives, config files, CONFIG GET/SET/REWRITE
- ``server``    the node: listeners, cron, stats, shutdown
- ``client``    one client connection: RESP parsing, dispatch, replies, blocking
- ``resp``      RESP2/RESP3 reply encoding
- ``job``       the Job object, job IDs, states, SHOW rendering
- ``jobs``      the job registry: lookup, awake timers, the job state machine
- ``queue``     queues: ordered jobs, blocked clients, pause, stats
- ``memory``    maxmemory accounting and eviction
- ``cluster``   this node's view of the cluster (single node for now)
- ``commands``  one module per command family; ``commands.table`` maps names
"""

DISQUE_VERSION = "1.0-rc1"
__version__ = "0.1.0"
