from evalgate.cli import main

raise SystemExit(main())
