"""`python -m disque_benchmark` runs the `disque-benchmark` command."""

import sys

from disque_benchmark.main import main

if __name__ == "__main__":
    sys.exit(main())
