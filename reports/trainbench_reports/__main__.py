"""Entry point for ``python -m trainbench_reports``."""
import sys

from .cli import main

sys.exit(main())
