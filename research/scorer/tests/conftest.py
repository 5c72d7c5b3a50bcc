"""Fixtures the studies' tests share with the shipped scorer's tests (the training pool, a tiny backbone)."""

from tests.test_trainscorer import pool, tiny_backbone  # noqa: F401
