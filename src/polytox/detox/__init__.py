"""Detoxification methods of RTP §5 and DExperts, with their fluency and diversity cost.

Decoding-time methods (word filter, VOCAB-SHIFT, DExperts, ATCON's attribute token, PPLM) are
``LogitsAdjuster`` objects that the transformers backend calls where logits become tokens; data-based
methods (DAPT, ATCON, DExperts' experts, VOCAB-SHIFT's projection, PPLM's head) are trained by
``polytox detox train``. ``fluency`` and ``diversity`` measure what detoxification costs.
"""
