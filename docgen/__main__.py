"""`python -m docgen [--check]`: see the package's docstring."""

from __future__ import annotations

import argparse
import sys

from docgen import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m docgen",
        description="Write completions/, man/ and docs/layers.md from the tables.",
    )
    parser.add_argument("--check", action="store_true", help="fail if files are stale")
    args = parser.parse_args(argv)
    stale = generate(check=args.check)
    for relative in stale:
        print(f"{'stale' if args.check else 'wrote'}: {relative}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
