"""`python -m specselect`: the same CLI as the `specselect` command."""

import sys

from specselect._cli.main import main

__all__: list[str] = []

sys.exit(main())
