"""Code shared by the node and the project's clients (`disque`, `disque-tui`,
`disque_spark`): ``splitargs`` (Redis' argument splitter, for inline commands
and the CLI). The TLS options and the connection helpers live in the client
library (``disque.tls``, ``disque.protocol``).

Kept free of the CLI's and the dashboard's dependencies (only redis-py and
the standard library), so `disque_spark` can ship it to Spark executors
alongside itself.
"""

from disque_common.splitargs import SplitError, split_args

__all__ = ["SplitError", "split_args"]
