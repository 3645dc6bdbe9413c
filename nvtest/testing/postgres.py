"""A real, throw-away PostgreSQL server on this machine, for the history store's tests.

``initdb`` a cluster in a temporary directory, ``pg_ctl start`` it on a free port of
127.0.0.1 (its socket in the same directory), create a database, hand out its URL; at the
end ``pg_ctl stop -m fast`` and remove the directory. Never touches a system PostgreSQL
service: nothing outside the temporary directory is read or written.

The binaries come from Debian's ``postgresql`` package (``/usr/lib/postgresql/<v>/bin``,
or on ``PATH``). PostgreSQL refuses to run as root: as root, the server runs as the
``postgres`` user the package creates (else ``nobody``), owning the directory::

    with PostgresServer() as pg:
        store = HistoryStore(pg.url)      # postgresql+psycopg://nvtest@127.0.0.1:PORT/nvtest

Raises :class:`~nvtest.errors.ClusterStartError` (with the server log's tail) when it does
not come up; :func:`missing_postgres` says what is missing to the tests that skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from nvtest.errors import ClusterStartError

__all__ = ["PostgresServer", "find_pg_bin", "missing_postgres"]


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest Debian version first), or None."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(Path(d) / "initdb", os.X_OK) and os.access(Path(d) / "pg_ctl", os.X_OK):
            return Path(d)
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found and shutil.which("pg_ctl") else None


def _run_as() -> str | None:
    """The user the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


def missing_postgres() -> str | None:
    """Why no server can be started here (the binaries or a non-root user), or None."""
    if find_pg_bin() is None:
        return "PostgreSQL server binaries not found (apt-get install postgresql)"
    if os.geteuid() == 0 and _run_as() is None:
        return "running as root with no 'postgres' or 'nobody' user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (3) is not installed (pip install 'psycopg[binary]')"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory (see the module docstring).

    Args:
        database: the database created for the tests.
        start_timeout_s: how long ``pg_ctl start -w`` may wait, seconds.

    Attributes (after start): ``url`` (SQLAlchemy, psycopg 3), ``port``, ``dir``.
    """

    def __init__(self, database: str = "nvtest", *, start_timeout_s: float = 60.0) -> None:
        self.database = database
        self.start_timeout_s = start_timeout_s
        self.dir = Path()
        self.port = 0
        self._bin = find_pg_bin()
        self._user = _run_as()
        self._started = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://nvtest@127.0.0.1:{self.port}/{self.database}"

    def _cmd(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=self._user,
            cwd=self.dir,
            env={**os.environ, "LC_ALL": "C.UTF-8", "PGTZ": "UTC"},
        )

    def _log_tail(self) -> str:
        try:
            return "\n".join((self.dir / "server.log").read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no server log)"

    def start(self) -> None:
        """initdb, start the server, create the database.

        Raises:
            ClusterStartError: a binary is missing or a step failed.
        """
        if self._bin is None:
            raise ClusterStartError("PostgreSQL server binaries not found (apt-get install postgresql)")
        self.dir = Path(tempfile.mkdtemp(prefix="nvtest-pg-"))
        if self._user:
            pw = pwd.getpwnam(self._user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.dir.chmod(0o700)
        self.port = _free_port()
        steps = [
            [str(self._bin / "initdb"), "-D", str(self.dir / "data"), "-A", "trust", "-U", "nvtest", "-E", "UTF8"],
            [
                str(self._bin / "pg_ctl"),
                "-D",
                str(self.dir / "data"),
                "-l",
                str(self.dir / "server.log"),
                "-w",
                "-t",
                str(int(self.start_timeout_s)),
                "-o",
                f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ],
            [str(self._bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "nvtest", self.database],
        ]
        for argv in steps:
            proc = self._cmd(argv, self.start_timeout_s + 30)
            if proc.returncode != 0:
                self._started = argv[-1] != "start" and self._started
                self.stop()
                raise ClusterStartError(
                    f"{Path(argv[0]).name} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-800:]}\n{self._log_tail()}"
                )
            if argv[-1] == "start":
                self._started = True

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        if self._started and self._bin is not None:
            try:
                self._cmd([str(self._bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop"], 60)
            except (OSError, subprocess.SubprocessError):
                pass
            self._started = False
        if self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
