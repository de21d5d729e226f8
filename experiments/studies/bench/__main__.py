"""``python -m experiments.studies.bench``: its command."""
import sys

from .command import main

sys.exit(main())
