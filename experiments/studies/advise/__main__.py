"""``python -m experiments.studies.advise``: its command."""
import sys

from .command import main

sys.exit(main())
