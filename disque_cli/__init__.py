"""disque: the command line client of Disque, a redis-cli for job queues.

One-shot commands, stdin pipelines, an interactive REPL with completion and
hints, mass insertion (--pipe) and monitoring modes (--stat, --latency).
"""

__version__ = "0.1.0"

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7711
