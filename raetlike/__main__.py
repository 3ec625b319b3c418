"""``python -m raetlike`` is the ``raetlike`` command."""

from raetlike.cli import main

raise SystemExit(main())
