"""The suite's own fixtures (an isolated cache per test, the shared data folder) and those the studies' tests
share with the shipped scorer's tests (the training pool, a tiny backbone)."""

from tests.conftest import _isolated_cache, model_cache_dir, shared_data  # noqa: F401
from tests.test_trainscorer import pool, tiny_backbone  # noqa: F401
