"""Generation backends: transformers (local), fake (tests, dry runs); more register by name."""

from __future__ import annotations

from ..registry import resolve
from ..spec import GenerationSpec
from .base import Generator

__all__ = ["Generator", "build_generator"]


def build_generator(spec: GenerationSpec) -> Generator:
    """Instantiate the backend named by ``spec.backend``."""
    generator: Generator = resolve("generator", spec.backend)(spec)
    return generator
