"""`python -m sebridge`: the same as the `sebridge` command."""

from sebridge.cli.main import main

raise SystemExit(main())
