"""`python -m disque_cli` runs the `disque` command."""

from disque_cli.main import main

if __name__ == "__main__":
    main()
