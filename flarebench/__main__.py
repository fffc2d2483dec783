"""``python -m flarebench``: the same commands as the ``flarebench`` console script."""

import sys

from flarebench.bench.cli import main

sys.exit(main())
