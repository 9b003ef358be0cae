"""``python -m pytest_elr``: the ``elr`` command, without the console script on the PATH."""

import sys

from pytest_elr.cli import main

sys.exit(main())
