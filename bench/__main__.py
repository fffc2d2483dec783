"""``python -m bench``: the same commands as the ``flarebench`` console script."""

import sys

from bench.cli import main

sys.exit(main())
