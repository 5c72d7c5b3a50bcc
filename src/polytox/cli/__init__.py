"""The ``polytox`` command line: one thin module per subcommand."""
