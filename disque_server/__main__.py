from disque_server.main import main

raise SystemExit(main())
