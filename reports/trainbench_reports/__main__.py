"""Entry point for ``python -m trainbench_reports``. Before anything else it checks that this
interpreter can run the report at all: a Python older than 3.8, or one without matplotlib, numpy
or jsonschema, exits with status 3 and one line saying which (the harness then suggests
TRAINBENCH_PYTHON). Kept to syntax any Python 3 parses, so an old one reaches the check."""
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("trainbench_reports: error: %s is Python %d.%d; the report needs 3.8 or newer\n"
                     % ((sys.executable,) + tuple(sys.version_info[:2])))
    sys.exit(3)
try:
    import jsonschema  # noqa: F401
    import matplotlib  # noqa: F401
    import numpy  # noqa: F401
except ImportError as e:
    sys.stderr.write("trainbench_reports: error: %s cannot import %s: %s\n"
                     % (sys.executable, e.name or "a dependency", e))
    sys.exit(3)

from .cli import main  # noqa: E402

sys.exit(main())
