"""The command-line verbs (`python -m klrl <verb>`), one module each, apart from the library they
drive: each declares HELP, `add_arguments` and `run`, and imports the library inside them (klrl.cli
registers them and loads none of the library for `--help`)."""
