"""``python -m raetlike`` is the ``raetlike`` command."""

from raetlike._entry import main

raise SystemExit(main())
