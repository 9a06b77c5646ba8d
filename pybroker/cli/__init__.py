"""The command line: every ``pybroker`` subcommand, ``serve``'s composition root too."""
