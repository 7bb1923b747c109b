"""`python -m klrl`: the command line (klrl.cli)."""

from klrl.cli import main

raise SystemExit(main())
