"""``python -m experiments.studies.reproduce``: its command."""
import sys

from .command import main

sys.exit(main())
