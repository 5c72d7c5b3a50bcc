"""URL -> registrable domain ("eTLD+1") with the Public Suffix List, offline.

``news.bbc.co.uk`` and ``www.bbc.co.uk`` are both ``bbc.co.uk``; ``foo.blogspot.com`` stays itself
(``blogspot.com`` is a public suffix). The list is the snapshot shipped inside the ``publicsuffixlist``
wheel (no network fetch); ``pip install 'polytox[corpus]'``. IP addresses are kept as they are, and a
missing or unparsable URL has no domain (``None``), which the statistics count as ``(no url)``.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from ..errors import require

NO_DOMAIN = "(no url)"


@lru_cache(maxsize=1)
def _psl() -> Any:
    module = require("publicsuffixlist", "corpus")
    return module.PublicSuffixList()  # the bundled snapshot; never downloads


def host_of(url: str) -> str | None:
    """The lower-cased host of ``url`` (a bare ``example.com/path`` is read as a host too)."""
    text = url.strip()
    if not text:
        return None
    try:
        host = urlsplit(text if "//" in text else f"//{text}").hostname
    except ValueError:  # e.g. an invalid IPv6 literal
        return None
    return host.rstrip(".") if host else None


@lru_cache(maxsize=262_144)
def registrable_domain(host: str) -> str | None:
    """``host``'s registrable domain, the host itself for an IP, or None for a bare public suffix."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    if "." not in host:
        return None  # "localhost", a single label: not a public domain
    domain = _psl().privatesuffix(host)
    return str(domain) if domain else None


def domain_of(url: str | None) -> str | None:
    """The registrable domain of a URL, or None when there is no usable URL."""
    if not url:
        return None
    host = host_of(url)
    return registrable_domain(host) if host else None


def normalize_key(value: str) -> str | None:
    """A label table's domain cell (a URL, a host or a domain) as a registrable domain."""
    return domain_of(value.strip().lower())
