from klrl.cli import main

raise SystemExit(main())
