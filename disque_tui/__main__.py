"""`python -m disque_tui`."""

from disque_tui.main import main

raise SystemExit(main())
