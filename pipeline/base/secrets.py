"""Credentials never reach a message, a log line or a file: URLs are shown with their user info and their secret
query values removed.

    redact("http://alice:p@ss@host/x and https://h2/g.zip?token=abc&v=1")
        -> "http://***@host/x and https://h2/g.zip?token=***&v=1"

Credentials belong in ~/.netrc (which `requests` reads), in proxy variables or in the environment variables
of the tool, never in a URL the config holds: the config is written to params.yaml, which git tracks.
"""

from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import parse_qsl, urlsplit

# scheme://userinfo@ : the user info ends at the LAST "@" of the authority (before "/", "?", "#", whitespace or a
# quote), so that a password holding "@" or ":" is removed whole
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"<>]*)@")
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;](?P<name>[^=&#\s'\"<>?;]+)=)(?P<value>[^&#;\s'\"<>\])]*)")
# query parameters that carry credentials (compared lower-case, "-" read as "_"): tokens, API keys, signatures of
# signed URLs (S3's X-Amz-*, Google's X-Goog-*, Azure SAS's sig), passwords
SECRET_PARAMS = frozenset(
    "token access_token auth_token id_token refresh_token session_token key api_key apikey access_key secret_key "
    "secret client_secret sig signature password passwd pwd auth credential credentials".split()
)
SECRET_PREFIXES = ("x_amz_", "x_goog_")
SECRET_SUFFIXES = ("_token", "_secret", "_password", "_signature")


def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def is_secret_param(name: str, extra: Iterable[str] = ()) -> bool:
    """True for a query parameter name that carries credentials, or one of `extra` (any case)."""
    name = _normal(name)
    return (
        name in SECRET_PARAMS
        or name.startswith(SECRET_PREFIXES)
        or name.endswith(SECRET_SUFFIXES)
        or name in {_normal(e) for e in extra}
    )


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with the user info (user:password@) of every URL in it replaced by ***@ and the value of every secret
    query parameter (is_secret_param; `extra` names more) by ***."""
    return _redact_query(_USERINFO.sub(lambda m: f"{m['scheme']}***@", str(text)), extra)


def redact_password(text: str) -> str:
    """Like `redact`, but the user name stays where there is a password (`http://bob:***@host`): how tracking and
    database URIs are shown, so that the account they use can still be told apart."""

    def hide(match: re.Match) -> str:
        user, colon, _ = match["userinfo"].partition(":")
        return f"{match['scheme']}{user}:***@" if colon else match[0]

    return _redact_query(_USERINFO.sub(hide, str(text)))


def _redact_query(text: str, extra: Iterable[str] = ()) -> str:
    extra = tuple(extra)
    return _QUERY_PARAM.sub(lambda m: f"{m['lead']}***" if is_secret_param(m["name"], extra) else m[0], text)


def has_credentials(url: str) -> bool:
    """True when `url` carries a user name or password (scheme://user:password@host/...)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return _USERINFO.search(url) is not None
    return parts.username is not None or parts.password is not None or _USERINFO.search(url) is not None


def secret_query_params(url: str, extra: Iterable[str] = ()) -> list[str]:
    """The names of `url`'s query parameters that carry credentials (is_secret_param), as the URL spells them."""
    try:
        query = urlsplit(url.strip()).query
    except ValueError:
        query = url.partition("?")[2]
    names = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
    return list(dict.fromkeys(n for n in names if is_secret_param(n, extra)))
