"""One library's audit rows as JSON on stdout, run by `klrl.audit.libraries.library_rows` with the
interpreter of the library's own environment: python -m klrl.audit.worker LIBRARY VOCAB HORIZON SEED."""

from __future__ import annotations

import json
import sys

from klrl.audit.gradients import audit_rows
from klrl.audit.libraries import settings_here

if __name__ == "__main__":
    library, vocab, horizon, seed = sys.argv[1], *map(int, sys.argv[2:5])
    try:
        rows = audit_rows(settings_here(library), vocab, horizon, seed)
    except ValueError as error:
        sys.exit(str(error))
    json.dump(rows, sys.stdout)
