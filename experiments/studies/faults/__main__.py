"""``python -m experiments.studies.faults``: its command."""
import sys

from .command import main

sys.exit(main())
