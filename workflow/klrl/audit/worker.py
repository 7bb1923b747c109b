"""One library's audit rows as a JSON file, written by `klrl.audit.libraries.library_rows` with the
interpreter of the library's own environment (the libraries print to stdout as they import):
python -m klrl.audit.worker LIBRARY VOCAB HORIZON SEED OUT.json [SETTING] (SETTING: the rows
`klrl audit --config` reports on that setting). A ValueError is its message on stderr, exit status
USER_ERROR."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from klrl.audit.libraries import USER_ERROR, rows_here

if __name__ == "__main__":
    library, vocab, horizon, seed, out = sys.argv[1], *map(int, sys.argv[2:5]), Path(sys.argv[5])
    setting = sys.argv[6] if len(sys.argv) > 6 else None
    # the toy's tensors are small: one thread is less CPU time (verl's rows: 43 s against 70 s with 2)
    torch.set_num_threads(1)
    try:
        rows = rows_here(library, vocab, horizon, seed, setting)
    except ValueError as error:
        print(error, file=sys.stderr)
        sys.exit(USER_ERROR)
    out.write_text(json.dumps(rows))
