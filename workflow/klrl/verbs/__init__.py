"""The verbs that drive a library subpackage from the command line (`python -m klrl train`,
`evaluate`, `audit`): argument parsing, locks, tracking and files around the library's calls.
klrl.cli lists every verb."""
