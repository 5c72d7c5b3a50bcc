"""The ``polytox`` command line: one thin module per subcommand.

Its entry point is ``polytox.cli.main:main`` (the ``polytox`` script); every module here is internal, and
Python users call ``polytox.api`` instead.
"""

__all__: list[str] = []
