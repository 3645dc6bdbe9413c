"""Where the history database is: ``--history``, ``$NVTEST_HISTORY``, or the default file.

The one reader of a history target. Accepted forms:

- ``off`` (or ``none``, ``no``, ``0``, ``false``): history off.
- an SQLAlchemy URL: ``sqlite:///path``, ``postgresql://user:pw@host:5432/db?sslmode=require``
  (``postgresql://`` and ``postgres://`` are read as ``postgresql+psycopg://``, psycopg 3),
  ``postgresql+psycopg://...``; libpq's ``?password=`` query form is accepted.
- a libpq keyword connection string, ``host=db user=op password=... dbname=fleet``
  (PostgreSQL's "Connection Strings", parsed by libpq itself through psycopg's
  ``conninfo_to_dict``): turned into the same URL.
- the path of an SQLite file, only when it is plainly one: it has a ``/`` or ends in
  ``.sqlite``, ``.sqlite3`` or ``.db``. Anything else is a :class:`ConfigError` naming these
  forms (a mistyped connection string never becomes a file of the fleet's history).

A target can carry a password. :func:`redact` is the form every message, report and record
shows: the password of the user part and every secret query key (:data:`SECRET_KEYS`) as
``***``; :func:`scrub` removes a known password from a driver's message.

Only URLs and keyword strings import SQLAlchemy (psycopg): a gate or a run with history
off pays nothing for them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

from nvtest.errors import ConfigError

__all__ = ["OFF", "SECRET_KEYS", "default_path", "redact", "resolve_target", "scrub", "secrets_of"]

#: Values of ``--history`` / ``$NVTEST_HISTORY`` that turn history off.
OFF = frozenset({"off", "none", "no", "0", "false"})

#: Query or keyword parameters whose value is a secret (libpq's ``password`` and
#: ``sslpassword``; ``passfile`` and ``sslkey`` name files and are shown).
SECRET_KEYS = frozenset({"password", "sslpassword"})

#: File suffixes that make a bare value an SQLite path.
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")

FORMS = (
    "accepted: a URL (sqlite:///PATH, postgresql://USER[:PASSWORD]@HOST[:PORT]/DB), a libpq "
    "keyword string (host=HOST user=USER dbname=DB), the path of an SQLite file (with a '/' or "
    "ending in .sqlite, .sqlite3 or .db), or 'off'"
)

_KEYWORD_DSN = re.compile(r"^\s*[A-Za-z_]+\s*=")
_HIDDEN = "***"


def default_path() -> Path:
    """``$XDG_DATA_HOME/nvtest/history.sqlite`` (``~/.local/share/nvtest/history.sqlite``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "nvtest" / "history.sqlite"


def _keyword_url(raw: str, field: str) -> str:
    """The URL of a libpq keyword string (see the module doc).

    Raises:
        ConfigError: libpq cannot parse it (its words are not repeated: they may hold the
            password).
    """
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:  # pragma: no cover - psycopg is a dependency
        raise ConfigError(f"a keyword connection string needs psycopg 3; {FORMS}", field=field) from exc
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(raw).items() if v is not None}
    except PsycopgError as exc:
        raise ConfigError(f"not a libpq connection string libpq can read; {FORMS}", field=field) from exc
    from sqlalchemy.engine import URL

    query: dict[str, str] = {}
    host, port = params.pop("host", None), params.pop("port", None)
    if host is not None and not re.fullmatch(r"[A-Za-z0-9.\-]+", host):
        query["host"] = host  # a socket directory, an IPv6 address, a host list: a parameter
        host = None
    if port is not None and (host is None or not port.isdigit()):
        query["port"] = port  # beside a host given as a parameter, or a port list
        port = None
    query.update(params)
    url = URL.create(
        "postgresql+psycopg",
        username=query.pop("user", None),
        password=query.pop("password", None),
        host=host,
        port=int(port) if port else None,
        database=query.pop("dbname", None),
        query=query,
    )
    return url.render_as_string(hide_password=False)


def resolve_target(value: str | os.PathLike[str] | None = None) -> str | None:
    """The SQLAlchemy URL of the history database, or None when history is off.

    Args:
        value: ``--history`` (None: ``$NVTEST_HISTORY``, else :func:`default_path`).

    Raises:
        ConfigError: a URL SQLAlchemy cannot read, a keyword string libpq cannot read, or a
            value that is none of the accepted forms. The message never repeats the value
            (it may hold a password), only its :func:`redact` form where it parses.
    """
    raw = os.fspath(value) if value is not None else os.environ.get("NVTEST_HISTORY")
    field = "--history" if value is not None else "$NVTEST_HISTORY"
    if raw is not None and raw.strip().lower() in OFF | {""}:
        return None
    if raw is None:
        raw = str(default_path())
    raw = raw.strip()
    if "://" in raw:
        if raw.startswith(("postgresql://", "postgres://")):
            raw = "postgresql+psycopg://" + raw.split("://", 1)[1]
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(raw).port  # noqa: B018 - a port that is not a number raises here
        except (ArgumentError, ValueError) as exc:
            # SQLAlchemy's message quotes the whole string, password and all
            raise ConfigError(f"not a database URL SQLAlchemy can read; {FORMS}", field=field) from exc
        return raw
    if _KEYWORD_DSN.match(raw):
        return _keyword_url(raw, field)
    if "/" in raw or raw.lower().endswith(SQLITE_SUFFIXES):
        return "sqlite:///" + str(Path(raw).expanduser().resolve())
    raise ConfigError(f"not a history target; {FORMS}", field=field)


def redact(url: str) -> str:
    """``url`` with its password (user part and :data:`SECRET_KEYS` in the query) as ``***``.

    For messages, reports and records; a string SQLAlchemy cannot read is shown as
    ``<unreadable history URL>`` (it could hold a password anywhere).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        u = make_url(url)
    except (ArgumentError, ValueError):
        return "<unreadable history URL>"
    if u.password is not None:
        u = u.set(password=_HIDDEN)
    if any(k.lower() in SECRET_KEYS for k in u.query):
        u = u.set(query={k: (_HIDDEN if k.lower() in SECRET_KEYS else v) for k, v in u.query.items()})
    return u.render_as_string(hide_password=False).replace(quote(_HIDDEN, safe=""), _HIDDEN)


def secrets_of(url: str) -> list[str]:
    """The secret values ``url`` carries (its password, secret query values), longest first."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        u = make_url(url)
    except (ArgumentError, ValueError):
        return []
    found = [str(u.password)] if u.password else []
    for k, v in u.query.items():
        if k.lower() in SECRET_KEYS:
            found += [v] if isinstance(v, str) else list(v)
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's error message) with every secret of ``url`` as ``***``, in its
    plain and its URL-quoted spellings, and the URL itself in its :func:`redact` form."""
    text = text.replace(url, redact(url))
    for secret in secrets_of(url):
        for spelling in {secret, quote(secret, safe=""), quote_plus(secret)}:
            text = text.replace(spelling, _HIDDEN)
    return text
