"""``python -m pybroker``: the same as the ``pybroker`` command."""

import sys

from pybroker.cli.main import main

sys.exit(main())
