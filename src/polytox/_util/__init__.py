"""Private plumbing shared by every layer: atomic writes, text helpers, a rate limiter. Not public API."""
