"""``python -m hugescope``: the same as the ``hugescope`` command."""

import sys

from .cli import main

sys.exit(main())
