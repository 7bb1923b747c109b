"""One library's audit rows as a JSON file, written by `klrl.audit.libraries.library_rows` with the
interpreter of the library's own environment (the libraries print to stdout as they import):
python -m klrl.audit.worker LIBRARY VOCAB HORIZON SEED OUT.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from klrl.audit.gradients import audit_rows
from klrl.audit.libraries import settings_here

if __name__ == "__main__":
    library, vocab, horizon, seed, out = sys.argv[1], *map(int, sys.argv[2:5]), Path(sys.argv[5])
    # the toy's tensors are small: one thread is less CPU time (verl's rows: 43 s against 70 s with 2)
    torch.set_num_threads(1)
    try:
        rows = audit_rows(settings_here(library), vocab, horizon, seed)
    except ValueError as error:
        sys.exit(str(error))
    out.write_text(json.dumps(rows))
