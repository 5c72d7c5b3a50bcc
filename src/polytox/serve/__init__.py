"""Local model servers polytox can start for its HTTP backends (llama.cpp through ``xllamacpp``)."""
