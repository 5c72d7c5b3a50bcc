"""Pretraining-corpus analysis (RTP §6, Appendix D; PTP Appendix A): score, stats, provenance, overlap.

One job per module:

- ``documents``: read a corpus (local JSONL / Parquet / CSV / ``.txt`` folders, or a streamed Hugging Face
  dataset) into ``CorpusDoc`` rows, giving bad input (empty, binary, unreadable, unknown language,
  missing URL) a defined status instead of an exception;
- ``domains``: URL -> registrable domain with the Public Suffix List (``publicsuffixlist``, offline);
- ``score``: stream a corpus through any registered scorer into resumable Parquet parts;
- ``ray``: the same scoring on Ray Data, and the band-partitioned overlap join;
- ``stats``: toxic shares with bootstrap CIs, the log-scale histogram, length / language / domain tables;
- ``render``: those statistics as Markdown and PNG;
- ``provenance``: join documents to user label tables (domain reliability, banned subreddits);
- ``overlap``: exact hashes, then MinHash LSH confirmed by exact Jaccard, between two corpora.
"""
