"""Code shared by the node and the project's clients (`disque`, `disque-tui`,
`disque_spark`): ``splitargs`` (Redis' argument splitter), ``tls`` (the TLS
options and settings) and ``client`` (connect, HELLO and node priority, INFO).

Kept free of the CLI's and the dashboard's dependencies (only redis-py and
the standard library), so `disque_spark` can ship it to Spark executors
alongside itself.
"""
