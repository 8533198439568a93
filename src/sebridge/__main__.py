"""`python -m sebridge`: the same as the `sebridge` command."""

from sebridge.cli import main

raise SystemExit(main())
