"""`python -m lagrax`: the `lagrax` command."""

import sys

from .cli import main


sys.exit(main())
