"""``python -m experiments.studies.synthetic_scan``: its command."""
import sys

from .command import main

sys.exit(main())
