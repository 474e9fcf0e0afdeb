"""``python -m planner``: the ``planner`` command."""

import sys

from planner.cli import main

sys.exit(main())
