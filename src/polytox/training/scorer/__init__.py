"""The default scorer's training side: the training pool (``data``, ``pack``, ``pool``), the head's fit
(``train``, ``attention_fit``), its measurement (``measure``, ``measurements``, ``group_bootstrap``,
``baselines``, ``reliability_plot``) and the fit of its scales (``scale_rows``, ``scale_languages``,
``scale_fit``). It writes the head, card and scales that ``polytox.scoring.ml`` (inference) reads."""
