"""Training, measurement and fitting of polytox's own models: a layer above the packages whose models it fits.

Nothing at inference time imports it (import-linter's contract ``inference never imports training``): a
scorer loads the files this package writes, never its code.
"""

__all__: list[str] = []  # internal: only the CLI's ``train-scorer`` runs it
