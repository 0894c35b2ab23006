"""disque-benchmark: load a Disque node or cluster with producers and consumers,
and measure rates and latencies (a program of its own, beside the `disque` CLI).

- ``main``    the command line, the plan (who connects where), the run, the report
- ``worker``  one load process: its producers and consumers (asyncio, hiredis)
- ``report``  the live display and the summaries (text, ``--json``)
- ``hist``    the latency histograms, merged across processes
"""
