"""One sanitiser for evidence brought back from a machine: what identifies the machine, its
units or its network is replaced with stable placeholders, in every file of a directory.

======================  =============================================  ==============================================
class                   found as                                       placeholder (N = 1, 2, ... per class)
======================  =============================================  ==============================================
``hostname``            the names given (short and FQDN), whole words  ``node00N``
                        (an address given is no name: see ipv4/ipv6)
``user``                ``/home/<name>``, ``/Users/<name>``             ``/home/user``, ``/home/user2``
``uuid``                any 8-4-4-4-12 hex UUID (``GPU-``, ``MIG-``,    ``GPU-00000000-0000-0000-0000-00000000000N``
                        ClusterUUID, bare)                             (prefix kept)
``serial``              the value of a field named ``serial`` (``Serial  same length: ``000000000000N``
                        Number : ...``, ``[SN]``, ``<serial>``, a CSV
                        column, a JSON key), VPD ``[Vn]`` hex ids
``hwaddr``              6 or more hex pairs joined by ``:`` or ``-``    same shape: ``00:00:00:00:00:0N``
                        (MAC, EUI-64 device serial, IPoIB address)
``guid``                ``0x`` + 16 hex on a line that names a GUID or  ``0x000000000000000N``,
                        PDI, a bare such line (``ibstat -p``), and      ``0000:0000:0000:000N`` (the same GUID in both
                        ``xxxx:xxxx:xxxx:xxxx``                          forms gets the same N)
``ipv4`` / ``ipv6``     dotted quads (not loopback, 0/8, 255/8,         ``192.0.2.N`` (RFC 5737; past 254:
                        multicast); IPv6 with 3+ groups or link-local   ``198.18.0.0/15``); ``2001:db8::N``, link-local
                                                                       GIDs keep ``fe80:0000:0000:0000`` and take
                                                                       the GUID's placeholder
======================  =============================================  ==============================================

Placeholders follow the conventions of ``tests/data/corpus/INDEX.md``. The same input gets
the same placeholder in every file one :class:`Sanitiser` sees (one evidence directory);
numbers follow the order of first appearance, and :meth:`Sanitiser.tree` visits files in
sorted order, so a rerun numbers alike. Placeholders are left alone (sanitising twice
changes nothing). UUIDs, serials, GUIDs and hardware addresses keep their length, so
column-aligned tool output stays aligned and parses as before.

Kept on purpose: PCI bus ids (slots, the same on every node of a model), board and GPU
part numbers (a product, not a unit), VBIOS, firmware and driver versions.

Text and XML are rewritten in place (undecodable bytes kept as they were); JSON and JSONL
are parsed, walked (keys and values; a key naming a serial makes its value one) and
written back, so they stay valid. A file with NUL bytes (parquet, PDF, images) cannot be
sanitised and is removed, as are symbolic links; :class:`TreeReport` names them. The
mapping itself is never written anywhere: only counts per class leave the process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Sanitiser", "TreeReport", "local_identities"]

_UUID_RE = re.compile(
    r"(?<![0-9A-Za-z])(?P<prefix>(?:GPU|MIG)-)?"
    r"(?P<u>[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})(?![0-9A-Za-z])"
)
_UUID_PLACEHOLDER = re.compile(r"00000000-0000-0000-0000-\d{12}")
_IPV6_RE = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:]|\.\w)")
_HWADDR_RE = re.compile(
    r"(?<![\w:.-])[0-9A-Fa-f]{2}(?P<sep>[:-])[0-9A-Fa-f]{2}(?:(?P=sep)[0-9A-Fa-f]{2}){4,}(?![\w:-]|\.\w)"
)
_GUID_HEX_RE = re.compile(r"(?<![0-9A-Za-z])0x(?P<h>[0-9A-Fa-f]{16})(?![0-9A-Za-z])")
_GUID_COLON_RE = re.compile(r"(?<![\w:.])(?P<g>[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3})(?![\w:]|\.\w)")
_GUID_CONTEXT_RE = re.compile(r"guid|\bpdi\b|_pdi\b|<pdi>", re.IGNORECASE)
_BARE_GUID_LINE_RE = re.compile(r"^\s*0x[0-9A-Fa-f]{16}\s*$")
_IPV4_RE = re.compile(r"(?<![\w.-])(?:\d{1,3}\.){3}\d{1,3}(?![\w-]|\.\d)")
_SERIAL_KEY_RE = re.compile(r"serial", re.IGNORECASE)
_SERIAL_TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_XML_ID_RE = re.compile(r"<(?P<tag>[A-Za-z_]*(?:serial|guid|pdi)[A-Za-z_]*)>(?P<val>[^<]*)</(?P=tag)>", re.IGNORECASE)
_VPD_VENDOR_RE = re.compile(r"^(?P<pre>\s*\[V[0-9A-Z]\][^:\n]*:\s*)(?P<val>.*)$")
_HEX_ID_RE = re.compile(r"(?<![0-9A-Za-z])[0-9A-Fa-f]{16,}(?![0-9A-Za-z])")
# the name stops at a shell prompt's ``#``/``$`` (``root@host:/home/user# cmd``)
_HOME_RE = re.compile(r"(?<![\w.-])(?P<root>/home/|/Users/)(?P<user>[A-Za-z0-9_][^/\s'\"<>:#$]*)")
_PLACEHOLDER_SERIAL = re.compile(r"0+\d{0,4}")
_STOPWORDS = frozenset({"n/a", "na", "none", "null", "unknown", "not", "available", "supported", "true", "false"})
_NOT_HOSTNAMES = frozenset({"localhost", "localhost.localdomain", "localdomain", "ip6-localhost"})
_DOC_V4 = (
    ipaddress.ip_network("192.0.2.0/24"),
    ipaddress.ip_network("198.51.100.0/24"),
    ipaddress.ip_network("203.0.113.0/24"),
    ipaddress.ip_network("198.18.0.0/15"),
)
_DOC_V6 = ipaddress.ip_network("2001:db8::/32")


@dataclass
class TreeReport:
    """What :meth:`Sanitiser.tree` did to a directory.

    Attributes:
        files: files read (text, XML, JSON).
        changed: files whose content changed.
        renamed: paths (relative, after renaming) whose name held an identifier.
        removed: ``{"path", "why"}`` for each file that could not be sanitised and was removed.
        replaced: distinct values replaced, per class (``{"uuid": 2, "hostname": 1}``).
    """

    files: int = 0
    changed: int = 0
    renamed: list[str] = field(default_factory=list)
    removed: list[dict[str, str]] = field(default_factory=list)
    replaced: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able view (no original value appears in it)."""
        return {
            "files": self.files,
            "changed": self.changed,
            "renamed": list(self.renamed),
            "removed": list(self.removed),
            "replaced": dict(sorted(self.replaced.items())),
        }


def local_identities() -> list[str]:
    """This machine's host names (short, FQDN, ``/etc/hostname``), for a :class:`Sanitiser`
    of evidence taken here."""
    import socket

    hosts = {socket.gethostname(), os.uname().nodename}
    try:
        hosts.add(socket.getfqdn())
    except OSError:
        pass
    try:
        hosts.add(Path("/etc/hostname").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    return sorted(h for h in hosts if h)


def _is_address(name: str) -> bool:
    """``name`` is an IPv4 or IPv6 address (``[fd00::1]``, ``fe80::1%ib0`` included)."""
    try:
        ipaddress.ip_address(name.strip("[]").split("%")[0])
    except ValueError:
        return False
    return True


def _same_length(n: int, length: int) -> str:
    return str(n).rjust(length, "0")


class Sanitiser:
    """Replaces identifying values with stable placeholders (see the module doc for classes).

    Args:
        hostnames: host names to replace wherever they stand as a whole word; an FQDN also
            replaces its short name (both become the same ``node00N``). ``localhost``, names
            of one character and names that are numbers are ignored; an IP address given here
            (an inventory's ``address``) is not a name: it is replaced as a whole address by
            the ``ipv4`` / ``ipv6`` rules wherever it stands, never split into its parts.

    Every home directory's name (``/home/<name>``, ``/Users/<name>``; ``root`` kept) is
    replaced whoever it belongs to.

    ``keep``: classes left as they are (``serial``, ``uuid``, ``guid``): an RMA bundle for the
    vendor (``nvtest rma``) keeps the parts' identities and replaces hosts and addresses.
    """

    def __init__(self, hostnames: Iterable[str] = (), *, keep: Iterable[str] = ()) -> None:
        self._keep = frozenset(keep)
        self._maps: dict[str, dict[Any, str]] = {}
        self._host_of: dict[str, str] = {}
        for name in hostnames:
            name = name.strip().rstrip(".")
            if len(name) < 2 or name.lower() in _NOT_HOSTNAMES or _is_address(name):
                continue  # an address is replaced whole, by the address rules, never split
            short = name.split(".")[0]
            if short.isdigit():
                continue  # not a host name (``10.0.0``): numbers are left alone
            if len(short) >= 2 and short.lower() not in _NOT_HOSTNAMES:
                self._host_of.setdefault(short, short)
            self._host_of[name] = short if len(short) >= 2 else name
        forms = sorted(self._host_of, key=len, reverse=True)
        self._host_re = (
            re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, forms)) + r")(?![A-Za-z0-9_])")
            if forms
            else None
        )

    # ---------------------------------------------------------------- placeholders

    def _placeholder(self, cls: str, key: Any, make: Callable[[int], str]) -> str:
        table = self._maps.setdefault(cls, {})
        if key not in table:
            table[key] = make(len(table) + 1)
        return table[key]

    def counts(self) -> dict[str, int]:
        """Distinct values replaced so far, per class."""
        return {cls: len(table) for cls, table in self._maps.items() if table}

    def _uuid(self, m: re.Match[str]) -> str:
        u = m.group("u")
        if "uuid" in self._keep or _UUID_PLACEHOLDER.fullmatch(u):
            return m.group(0)
        ph = self._placeholder("uuid", u.lower(), lambda n: f"00000000-0000-0000-0000-{n:012d}")
        return (m.group("prefix") or "") + ph

    def _guid_int(self, value: int, form: str) -> str:
        n = self._placeholder("guid", value, lambda n: str(n))
        if form == "colon":
            return f"0000:0000:0000:{int(n):04x}"
        return f"0x{int(n):016x}"

    def _hwaddr(self, m: re.Match[str]) -> str:
        text, sep = m.group(0), m.group("sep")
        groups = text.split(sep)
        if all(g == "00" for g in groups[:-2]) or all(g.lower() == "ff" for g in groups):
            return text  # a placeholder, or the broadcast address
        n = int(self._placeholder("hwaddr", "".join(groups).lower(), lambda n: str(n)))
        out = ["00"] * (len(groups) - 2) + [f"{(n >> 8) & 0xFF:02x}", f"{n & 0xFF:02x}"]
        return sep.join(out)

    def _ipv4_str(self, addr: ipaddress.IPv4Address) -> str:
        def make(n: int) -> str:
            if n <= 254:
                return f"192.0.2.{n}"
            return str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("198.18.0.0")) + n))

        return self._placeholder("ipv4", str(addr), make)

    def _ipv4(self, m: re.Match[str]) -> str:
        text = m.group(0)
        octets = text.split(".")
        if any(len(o) > 1 and o.startswith("0") for o in octets) or any(int(o) > 255 for o in octets):
            return text
        addr = ipaddress.IPv4Address(text)
        first = int(octets[0])
        if first in (0, 127, 255) or first >= 224 or any(addr in net for net in _DOC_V4):
            return text
        return self._ipv4_str(addr)

    def _ipv6(self, m: re.Match[str]) -> str:
        text = m.group(0)
        groups = text.split(":")
        nonempty = [g for g in groups if g]
        if "::" not in text and len(groups) != 8:
            return text
        if all(len(g) == 2 for g in nonempty) and len(nonempty) >= 6 and "::" not in text:
            return text  # an EUI-64 in colon form: the hardware-address rule takes it
        try:
            addr = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        link_local = addr.is_link_local
        if addr.is_loopback or addr.is_unspecified or addr in _DOC_V6:
            return text
        if len(nonempty) < 3 and not link_local:
            return text
        exploded = "::" not in text and len(groups) == 8
        if addr.ipv4_mapped is not None:
            if any(addr.ipv4_mapped in net for net in _DOC_V4) or addr.ipv4_mapped.is_loopback:
                return text
            mapped = ipaddress.IPv4Address(self._ipv4_str(addr.ipv4_mapped))
            new = ipaddress.IPv6Address(f"::ffff:{mapped}")
            return new.exploded if exploded else f"::ffff:{mapped}"
        if link_local:
            iid = int(addr) & ((1 << 64) - 1)
            if iid <= 0xFFFF:
                return text
            if exploded:
                return ":".join(groups[:4]) + ":" + self._guid_int(iid, "colon")
            n = int(self._placeholder("guid", iid, lambda n: str(n)))
            return f"fe80::{n:x}"
        ph = self._placeholder("ipv6", addr, lambda n: f"2001:db8::{n:x}")
        return ipaddress.IPv6Address(ph).exploded if exploded else ph

    def _serial_tokens(self, value: str) -> str:
        if "serial" in self._keep:
            return value

        def one(m: re.Match[str]) -> str:
            tok = m.group(0)
            if (
                len(tok) < 4
                or not any(c.isdigit() for c in tok)
                or tok.lower() in _STOPWORDS
                or _PLACEHOLDER_SERIAL.fullmatch(tok)
            ):
                return tok
            return self._placeholder("serial", tok, lambda n: _same_length(n, len(tok)))

        return _SERIAL_TOKEN_RE.sub(one, value)

    def _hex_ids(self, value: str) -> str:
        if "serial" in self._keep:
            return value

        def one(m: re.Match[str]) -> str:
            tok = m.group(0)
            if _PLACEHOLDER_SERIAL.fullmatch(tok):
                return tok
            return self._placeholder("serial", tok.lower(), lambda n: _same_length(n, len(tok)))

        return _HEX_ID_RE.sub(one, value)

    # ---------------------------------------------------------------- text

    def _guid_hex(self, m: re.Match[str]) -> str:
        value = int(m.group("h"), 16)
        if value <= 0xFFFF or "guid" in self._keep:
            return m.group(0)
        return self._guid_int(value, "hex")

    def _guid_colon(self, m: re.Match[str]) -> str:
        value = int(m.group("g").replace(":", ""), 16)
        if value <= 0xFFFF or "guid" in self._keep:
            return m.group(0)
        return self._guid_int(value, "colon")

    def _serial_line(self, line: str) -> str:
        """A ``key: value`` / ``key = value`` / ``| key | value |`` line whose key names a serial."""
        m = _SERIAL_KEY_RE.search(line)
        if not m:
            return line
        rest = line[m.end() :]
        sep = re.search(r"[:=|]", rest)
        if not sep:
            return line
        start = m.end() + sep.end()
        value = line[start:]
        end = value.find("|") if "|" in value and sep.group(0) == "|" else -1
        if end >= 0:
            return line[:start] + self._serial_tokens(value[:end]) + value[end:]
        return line[:start] + self._serial_tokens(value)

    def _xml_ids(self, m: re.Match[str]) -> str:
        tag, val = m.group("tag"), m.group("val")
        if "serial" in tag.lower():
            val = self._serial_tokens(val)
        else:
            val = _GUID_HEX_RE.sub(self._guid_hex, val)
            val = self._hex_ids(val) if _HEX_ID_RE.search(val) else val
        return f"<{tag}>{val}</{tag}>"

    def _line(self, line: str, serial_cols: set[int] | None) -> str:
        if _GUID_CONTEXT_RE.search(line) or _BARE_GUID_LINE_RE.match(line):
            line = _GUID_HEX_RE.sub(self._guid_hex, line)
        if "<" in line:
            line = _XML_ID_RE.sub(self._xml_ids, line)
        vpd = _VPD_VENDOR_RE.match(line)
        if vpd:
            line = vpd.group("pre") + self._hex_ids(vpd.group("val"))
        if serial_cols:
            cells = line.split(",")
            for i in serial_cols:
                if i < len(cells):
                    cells[i] = self._serial_tokens(cells[i])
            return ",".join(cells)
        if not line.lstrip().startswith("<"):
            line = self._serial_line(line)
        return line

    @staticmethod
    def _csv_serial_columns(line: str) -> set[int] | None:
        """Columns named ``serial`` of a ``nvidia-smi --query-gpu`` CSV header, or None."""
        cells = [c.strip().split(" [")[0].lower() for c in line.split(",")]
        if len(cells) < 2 or not all(re.fullmatch(r"[a-z_]+(?:\.[a-z_0-9]+)*", c) for c in cells):
            return None
        cols = {i for i, c in enumerate(cells) if c == "serial" or c.endswith(".serial")}
        return cols or None

    def _stream(self, lines: Iterable[str]) -> Iterator[str]:
        """Each of ``lines`` (with their endings) sanitised, one output per input, in order; the state that spans
        lines (a CSV header's serial columns) is kept from one to the next, so a file can be
        sanitised a line at a time (a 1 GB log never held whole)."""
        serial_cols: set[int] | None = None
        width = 0
        for chunk in lines:
            out: list[str] = []
            for line in chunk.splitlines(keepends=True):
                line = _UUID_RE.sub(self._uuid, line)
                line = _IPV6_RE.sub(self._ipv6, line)
                line = _HWADDR_RE.sub(self._hwaddr, line)
                line = _GUID_COLON_RE.sub(self._guid_colon, line)
                body = line.rstrip("\r\n")
                if serial_cols is not None and body.count(",") != width:
                    serial_cols = None
                header = self._csv_serial_columns(body) if serial_cols is None else None
                if header:
                    serial_cols, width = header, body.count(",")
                else:
                    line = self._line(body, serial_cols) + line[len(body) :]
                line = _IPV4_RE.sub(self._ipv4, line)
                if self._host_re is not None:
                    line = self._host_re.sub(self._hostname, line)
                out.append(_HOME_RE.sub(self._home, line))
            yield "".join(out)

    def text(self, text: str) -> str:
        """``text`` with every identifying value replaced (line endings and layout kept)."""
        return "".join(self._stream((text,)))

    def _hostname(self, m: re.Match[str]) -> str:
        short = self._host_of[m.group(0)]
        return self._placeholder("hostname", short, lambda n: f"node{n:03d}")

    def _home(self, m: re.Match[str]) -> str:
        user = m.group("user")
        if user == "root" or re.fullmatch(r"user\d*", user):
            return m.group(0)
        ph = self._placeholder("user", user, lambda n: "user" if n == 1 else f"user{n}")
        return m.group("root") + ph

    # ---------------------------------------------------------------- JSON

    def value(self, obj: Any, key: str | None = None) -> Any:
        """A JSON value with every string sanitised, keys included; the value of a key that
        names a serial number is a serial as a whole."""
        if isinstance(obj, dict):
            return {self.text(str(k)): self.value(v, str(k)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v, key) for v in obj]
        if isinstance(obj, str):
            if key is not None and "serial" in key.lower():
                obj = self._serial_tokens(obj)
            return self.text(obj)
        return obj

    def _json_text(self, text: str) -> str | None:
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        indent = 2 if "\n" in text.strip() else None
        tail = "\n" if text.endswith("\n") else ""
        return json.dumps(self.value(doc), indent=indent, ensure_ascii=False) + tail

    def _jsonl_text(self, text: str) -> str:
        out = []
        for line in text.splitlines(keepends=True):
            body = line.rstrip("\n")
            new = self._json_text(body) if body.strip() else None
            out.append((new if new is not None else self.text(body)) + line[len(body) :])
        return "".join(out)

    # ---------------------------------------------------------------- files

    def file(self, path: Path) -> str:
        """Sanitise one file in place: ``"changed"``, ``"unchanged"`` or ``"removed: <why>"``
        (a symbolic link, or a file with NUL bytes that cannot be rewritten as text).

        Raises:
            OSError: the file cannot be read or written.
        """
        if path.is_symlink():
            path.unlink()
            return "removed: a symbolic link (it may point outside the evidence)"
        with path.open("rb") as fh:
            if any(b"\0" in block for block in iter(lambda: fh.read(1 << 20), b"")):
                binary = True
            else:
                binary = False
        if binary:
            path.unlink()
            return "removed: binary file (NUL bytes), cannot be sanitised as text"
        if path.suffix == ".json":
            text = path.read_bytes().decode("utf-8", "surrogateescape")
            new = self._json_text(text)
            if new is not None:
                if new == text:
                    return "unchanged"
                path.write_bytes(new.encode("utf-8", "surrogateescape"))
                return "changed"
        return self._file_lines(path, jsonl=path.suffix == ".jsonl")

    def _file_lines(self, path: Path, *, jsonl: bool) -> str:
        """Rewrite ``path`` a line at a time through a temporary file beside it (removed on any
        error); ``"changed"`` or ``"unchanged"``."""
        tmp = path.with_name(f".{path.name}.sanitise.tmp")
        changed = False
        try:
            with path.open("rb") as src, tmp.open("wb") as dst:
                last = [""]

                def decoded() -> Iterator[str]:
                    for raw in src:
                        last[0] = raw.decode("utf-8", "surrogateescape")
                        yield last[0]

                news = (self._jsonl_text(line) for line in decoded()) if jsonl else self._stream(decoded())
                for new in news:
                    changed = changed or new != last[0]
                    dst.write(new.encode("utf-8", "surrogateescape"))
            if changed:
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return "changed" if changed else "unchanged"

    def tree(self, root: Path) -> TreeReport:
        """Sanitise every file under ``root`` (sorted, depth first), then rename files and
        directories whose names hold an identifier. Removed files (binary, links, or a file
        that could not be read or rewritten) are listed, never kept.

        Raises:
            OSError: a file or directory cannot be renamed or removed.
        """
        report = TreeReport()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:
                    outcome = self.file(path)
                except OSError as exc:  # never leave a file that was not sanitised
                    path.unlink(missing_ok=True)
                    outcome = f"removed: could not be rewritten ({exc.strerror or exc})"
                if outcome.startswith("removed"):
                    rel = self.text(str(path.relative_to(root)))
                    report.removed.append({"path": rel, "why": outcome.split(": ", 1)[1]})
                    continue
                report.files += 1
                report.changed += outcome == "changed"
            for name in list(dirnames):
                if (Path(dirpath) / name).is_symlink():
                    (Path(dirpath) / name).unlink()
                    dirnames.remove(name)
                    rel = self.text(str((Path(dirpath) / name).relative_to(root)))
                    report.removed.append({"path": rel, "why": "a symbolic link (it may point outside the evidence)"})
        self._rename(root, report)
        report.replaced = self.counts()
        return report

    def _rename(self, root: Path, report: TreeReport) -> None:
        for dirpath, dirnames, filenames in os.walk(root, topdown=False):
            for name in [*filenames, *dirnames]:
                new = self.text(name)
                if new != name:
                    target = Path(dirpath) / new
                    (Path(dirpath) / name).rename(target)
                    report.renamed.append(str(target.relative_to(root)))
        report.renamed.sort()
