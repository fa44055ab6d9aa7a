"""Credentials never reach a message, a log line or a file: URLs are shown with their user info removed.

    redact("http://alice:pw@host/x and https://bob@h2/") -> "http://***@host/x and https://***@h2/"

Credentials belong in ~/.netrc (which `requests` reads), in proxy variables or in the environment variables
of the tool, never in a URL the config holds: the config is written to params.yaml, which git tracks.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# scheme://userinfo@ : userinfo has no "/", "@" or whitespace (RFC 3986); the last "@" before the host ends it
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s'\"<>]*)@")


def redact(text: str) -> str:
    """`text` with the user info (user:password@) of every URL in it replaced by ***@."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}***@", str(text))


def has_credentials(url: str) -> bool:
    """True when `url` carries a user name or password (scheme://user:password@host/...)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return _USERINFO.search(url) is not None
    return parts.username is not None or parts.password is not None or _USERINFO.search(url) is not None
