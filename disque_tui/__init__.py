"""disque-tui: a live Textual dashboard of a whole Disque cluster.

`poller` owns all network I/O and produces immutable `ClusterSnapshot`s
(`snapshot`); the panels (`nodes_view`, `queues_view`, `queue_detail`,
`job_detail`) only render snapshots; `app` wires them together and `main`
parses the command line.
"""
