"""``python -m experiments.studies.verdict``: its command."""
import sys

from .command import main

sys.exit(main())
