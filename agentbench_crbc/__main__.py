"""``python -m agentbench_crbc``: the ``abc`` command line."""

import sys

from .cli import main

sys.exit(main())
