"""`klrl audit`: the audit table (and CSV) of each library's KL settings, and the block of docs/audit.md.

Each library runs where it is installed: TRL in the project's venv, verl and OpenRLHF each in its
own environment (`make audit-env LIBRARY=verl|openrlhf`). Without --library, every library whose
environment is built is audited and the others are named on stderr; --library names one (or,
repeated, several) and a missing environment is one line naming its make target. The block
`<!-- audit:begin -->` … `<!-- audit:end -->` needs every library: it is this command's table and
the one-line reasons for the libraries without an adapter, under the line naming the command; --doc
also rewrites the block `<!-- audit-config:begin -->` … `<!-- audit-config:end -->`: CONFIG_EXAMPLES'
--config output.

--config FILE reads a researcher's launch file (`klrl.audit.user_config`: a verl script, override list
or YAML; an OpenRLHF script, old or new flags; TRL's GRPOConfig or RLOOConfig YAML) and prints what
it was read as (the library and why, each KL key with its line, the KL configuration, its gradient's
target, the change that makes it unbiased), then the audited setting's row and the library's
settings whose on-policy gradient is the sequence's reverse KL's; or one line when the file
applies no KL term.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "another RL library's own KL code on the tabular policy: its exact gradient bias"
# the launch files docs/audit.md's --config examples run (`--doc` rewrites their block): a verl script, an
# OpenRLHF script of the old flags, a TRL recipe
CONFIG_EXAMPLES = (
    "tests/audit/configs/verl_grpo_qwen2_5-7b_math.sh",
    "tests/audit/configs/openrlhf_0.6.0_grpo_llama_ray.sh",
    "tests/audit/configs/open-r1/grpo/config_simple_rl_beta.yaml",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--library", action="append", help="TRL, verl or OpenRLHF (repeatable; default: every one built)"
    )
    parser.add_argument("--out", type=Path, help="CSV to write (one row per library setting and mode)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--doc", type=Path, help="Markdown file whose audit block to rewrite, docs/audit.md (audits every library)"
    )
    source.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a launch file of verl (a script running verl.trainer.main_ppo, its overrides, or YAML), OpenRLHF "
        "(a script running train_ppo_ray, or its flags) or TRL (GRPOConfig/RLOOConfig YAML or JSON): what it "
        "optimises, its setting's row and what gives the sequence's reverse KL's gradient (--library: which "
        "library the file is, if it does not tell)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the toy problem (πθ, πref, μ)")
    parser.add_argument("--vocab", type=int, default=3, help="vocabulary size V")
    parser.add_argument("--horizon", type=int, default=4, help="sequence length T")


def run(args: argparse.Namespace) -> None:
    if args.config:  # the file is read before torch is imported: a bad file is refused at once
        config(args)
        return
    from klrl.audit.gradients import COLUMNS
    from klrl.audit.libraries import ADAPTERS, library_name, library_rows
    from klrl.audit.report import config_examples_block, doc_block, markdown
    from klrl.reports.readme_blocks import rewrite
    from klrl.toy.bias import write_csv

    if args.library:
        libraries, skip_missing = [library_name(name) for name in args.library], False
    else:
        libraries, skip_missing = list(ADAPTERS), not args.doc
    rows = []
    for library in libraries:
        try:
            rows += library_rows(library, args.vocab, args.horizon, args.seed)
        except ValueError as error:
            if not skip_missing or "run `make" not in str(error):
                raise
            print(f"not audited here: {error}", file=sys.stderr)
    if not rows:
        raise ValueError("no library to audit: run `make install` (TRL) or `make audit-env LIBRARY=verl|openrlhf`")
    print(markdown(rows), end="")
    if args.out:
        write_csv(rows, args.out, COLUMNS)
        print(f"wrote {len(rows)} rows to {args.out}")
    if args.doc:
        examples = []
        for example in CONFIG_EXAMPLES:
            pieces: list[str] = []
            config_output(Path(example), None, args.vocab, args.horizon, args.seed, pieces.append)
            examples.append((example, "".join(pieces)))
        text = rewrite(args.doc.read_text(), doc_block(rows))
        args.doc.write_text(rewrite(text, config_examples_block(examples)))
        print(f"{args.doc}: audit block and --config examples rewritten")


def config(args: argparse.Namespace) -> None:
    """--config: what the file was read as, then its setting's rows and the advice (`config_output`)."""
    from klrl.audit.libraries import library_name

    if args.library and len(args.library) > 1:
        raise ValueError("--config: one --library at most (the library the file is)")
    library = library_name(args.library[0]) if args.library else None
    rows = config_output(args.config, library, args.vocab, args.horizon, args.seed, lambda text: print(text, end=""))
    if args.out and rows:
        from klrl.audit.gradients import COLUMNS
        from klrl.toy.bias import write_csv

        write_csv(rows, args.out, COLUMNS)
        print(f"wrote {len(rows)} rows to {args.out}")


def config_output(path: Path, library: str | None, vocab: int, horizon: int, seed: int, emit) -> list[dict]:
    """`klrl audit --config`'s text, given to `emit` piece by piece: the reading first, so a missing library
    environment loses none of it; then the setting's rows and the advice (or one line: no KL term). Its rows."""
    from klrl.audit.libraries import library_rows
    from klrl.audit.user_config import read_config

    reading = read_config(path, library)
    emit("\n".join(reading.lines(path)) + "\n")
    if reading.setting is None:
        emit(f"{path}: {reading.library} applies no KL term ({reading.no_kl}): nothing to audit\n")
        return []
    try:
        rows = library_rows(reading.library, vocab, horizon, seed, reading.setting)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    from klrl.audit.report import setting_report

    emit("\n" + setting_report(str(path), reading.setting, rows, reading.target))
    return rows
