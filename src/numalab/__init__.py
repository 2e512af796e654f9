"""numalab: how the Linux kernel places work on NUMA machines, as a computational book."""

import sys as _sys

__version__ = "0.1.0"

# jsonschema (which altair and nbformat import) loads rfc3987_syntax, when it
# is installed, for its optional "iri" and "iri-reference" format checks, and
# that module compiles an Earley grammar at import: about 2.5 CPU-seconds in
# every notebook kernel and build process. Vega-Lite's schema uses no IRI
# format (only uri, uri-reference and color-hex; tests/test_speed.py checks),
# so numalab's processes do without it: jsonschema then skips those two
# formats, as it does wherever the package is not installed.
SKIPPED_MODULES = ("rfc3987_syntax",)
for _name in SKIPPED_MODULES:
    _sys.modules.setdefault(_name, None)
