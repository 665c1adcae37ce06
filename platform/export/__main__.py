"""``python -m platform.export``: see ``platform.export.cli``."""

import sys

from platform.export.cli import main

sys.exit(main())
