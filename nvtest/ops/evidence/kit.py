"""The evidence kit itself: :class:`Kit` runs every step of :mod:`nvtest.ops.evidence.steps`
into OUT, writes the manifest and the summary and sanitises OUT (see :mod:`nvtest.ops.evidence`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import site
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from nvtest import __version__
from nvtest.analysis.evidence import render_summary
from nvtest.analysis.sanitise import Sanitiser, local_identities
from nvtest.config.resources import probes_dir
from nvtest.config.skus import load_catalog
from nvtest.errors import ConfigError, NvtestError, ParseError
from nvtest.ops.evidence.steps import (
    BUDGET_S,
    Step,
    VersionProbe,
    capture_steps,
    fit_burnin,
    probe_steps,
    run_steps,
    version_probes,
)
from nvtest.parsers import nvidia_smi_xml
from nvtest.report.console import make_console
from nvtest.transports.local import LocalTask, local_hostname, run_argv

__all__ = ["KIT_ENTRIES", "Kit", "StepOutcome", "check_steps", "run_with_deadline"]

#: What a kit writes at OUT's top level; a non-empty OUT holding anything else is refused.
KIT_ENTRIES = frozenset({"manifest.json", "summary.md", "captures", "probes", "runs", ".scratch"})
#: Format version of manifest.json.
MANIFEST_VERSION = 1
#: Hints for a tool missing from PATH.
MISSING_HINT = {
    "nvidia-smi": "no NVIDIA driver installed",
    "lspci": "pciutils not installed",
    "dcgmi": "DCGM not installed",
    "nvbandwidth": "nvbandwidth not installed",
}


def check_steps(only: frozenset[str] | None, out: Path, *, short: bool) -> None:
    """Refuse step names the kit does not have (``--steps``).

    Raises:
        ConfigError: a name in ``only`` is neither a group (capture, probe, run) nor a step.
    """
    known = {"capture", "probe", "run"} | {
        s.name for s in capture_steps() + probe_steps(probes_dir(), short=short, gpus=0) + run_steps(out, short=short)
    }
    if only and only - known:
        raise ConfigError(
            f"unknown step(s) {', '.join(sorted(only - known))}; known: {', '.join(sorted(known))}", field="--steps"
        )


@dataclass(frozen=True)
class StepOutcome:
    """How one command ended: its exit code (None when its deadline killed it), seconds,
    whether its deadline stopped it, and, when a process of it survived SIGKILL, the
    transport's words for it (``unkillable (still alive after SIGKILL: ...)``)."""

    exit_code: int | None
    duration_s: float
    timed_out: bool
    unkillable: str | None = None


def run_with_deadline(
    argv: list[str],
    stdout: Path,
    stderr: Path,
    *,
    deadline_s: float,
    kill_after_s: float,
    env: dict[str, str],
    cwd: Path,
    on_start: Callable[[LocalTask], None] | None = None,
) -> StepOutcome:
    """Run ``argv`` with its output in files (verbatim, whole) through the local transport's
    runner (:func:`~nvtest.transports.local.run_argv`): at ``deadline_s`` its whole task
    (group, session, descendants, task token) gets SIGTERM, then SIGKILL ``kill_after_s``
    later; a process alive ``kill_after_s`` after SIGKILL is abandoned as unkillable.

    ``on_start(task)`` is called with the running task (the kit's signal handler uses it to
    stop the step).

    Raises:
        OSError: the command cannot be started.
    """
    res = run_argv(
        argv,
        timeout_s=deadline_s,
        env=env,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        kill_grace_s=kill_after_s,
        on_start=on_start,
    )
    unkillable = (res.error or "").partition("; ")[2] if res.failure == "unkillable" else None
    return StepOutcome(res.exit_code, res.duration_s, res.timed_out, unkillable)


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:300]
    return ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _now() -> str:
    return dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class Kit:
    """One collection of GPU evidence into ``out`` (see the module doc).

    Attributes:
        out: the evidence directory (created; a previous kit's files in it are replaced).
        short: the short form (small sizes, 3 s burn-in, a delivery subset).
        budget_s: the whole kit's time; every step ends by ``budget_s`` minus a reserve
            for the summary and the sanitiser.
        only: groups or step names to run (None: all); the others are recorded as not run.
        console: where each step's line is printed (``nvtest evidence`` gives its stdout).
        kit_error: set when the kit itself failed part-way (what was taken is still
            summarised and sanitised).
    """

    out: Path
    short: bool = False
    budget_s: float = BUDGET_S
    only: frozenset[str] | None = None
    console: Console = field(default_factory=make_console, repr=False)
    steps: list[dict[str, Any]] = field(default_factory=list)
    _version_text: dict[str, str] = field(default_factory=dict)
    _identities: list[str] = field(default_factory=list)
    _host: str = ""
    _t0: float = 0.0
    _started_at: str = ""
    kit_error: str | None = None
    _current: LocalTask | None = None
    _stop_reason: str | None = None

    # ------------------------------------------------------------ setup

    def _prepare(self) -> None:
        self.out = self.out.expanduser().resolve()
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError("not a directory", path=str(self.out), field="--out")
        if self.out.is_dir():
            extra = sorted(p.name for p in self.out.iterdir() if p.name not in KIT_ENTRIES)
            if extra:
                raise ConfigError(
                    f"holds files that are not an evidence kit's ({', '.join(extra[:5])}); choose an empty directory",
                    path=str(self.out),
                    field="--out",
                )
            for name in KIT_ENTRIES:
                p = self.out / name
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif p.exists() or p.is_symlink():
                    p.unlink()
        for sub in ("captures", "probes", "runs", ".scratch/home", ".scratch/tmp", ".scratch/cache", ".scratch/work"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)

    def _env(self) -> dict[str, str]:
        scratch = self.out / ".scratch"
        env = dict(os.environ)
        env.update(
            HOME=str(scratch / "home"),
            TMPDIR=str(scratch / "tmp"),
            XDG_CACHE_HOME=str(scratch / "cache"),
            CUDA_CACHE_PATH=str(scratch / "cache" / "nv"),
            TRITON_CACHE_DIR=str(scratch / "cache" / "triton"),
            CUPY_CACHE_DIR=str(scratch / "cache" / "cupy"),
            MPLCONFIGDIR=str(scratch / "cache" / "matplotlib"),
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONUSERBASE=site.getuserbase(),  # a user-site torch stays visible with HOME moved
        )
        checkout = Path(__file__).resolve().parents[3]
        if (checkout / "pyproject.toml").is_file():
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)
        return env

    # ------------------------------------------------------------ budget

    def _reserve(self) -> float:
        return min(30.0, self.budget_s * 0.1)

    def _left(self) -> float:
        return self._t0 + self.budget_s - self._reserve() - time.monotonic()

    def _selected(self, step: Step) -> bool:
        return self.only is None or step.group in self.only or step.name in self.only

    # ------------------------------------------------------------ records

    def _record(self, step: Step, **fields: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "name": step.name,
            "group": step.group,
            "tool": step.tool,
            "argv": list(step.argv),
            "status": "not-run",
            "exit_code": None,
            "duration_s": 0.0,
            "deadline_s": step.deadline_s,
            "started_at": None,
            "version": None,
            "version_argv": None,
            "reason": None,
            "files": [],
        }
        rec.update(fields)
        self.steps.append(rec)
        self._write_manifest()
        n = len(self.steps)
        note = f"  {rec['reason']}" if rec.get("reason") else ""
        self.console.print(
            f"[evidence] {n:2d} {rec['status']:<9} {step.name:<28} {rec['duration_s']:6.1f} s{note}",
            markup=False,
            highlight=False,
        )
        return rec

    def _not_run(self, step: Step, reason: str) -> dict[str, Any]:
        return self._record(step, status="not-run", reason=reason)

    def _gate(self, step: Step, kill_after_s: float) -> tuple[float | None, str | None]:
        """The deadline this step runs under, or None and why it does not start."""
        if self._stop_reason:
            return None, f"not started: {self._stop_reason}"
        if not self._selected(step):
            return None, f"not selected (--steps {','.join(sorted(self.only or ()))})"
        left = self._left() - kill_after_s
        if left < step.min_start_s:
            return None, f"not started: {max(0.0, left):.0f} s left of the kit's {self.budget_s:g} s budget"
        return min(step.deadline_s, left), None

    def _execute(self, step: Step, deadline: float, kill_after_s: float) -> tuple[StepOutcome, str, str]:
        stdout = self.out / step.output
        stderr = stdout.with_name(stdout.name.rsplit(".", 1)[0] + ".stderr.txt")
        stdout.parent.mkdir(parents=True, exist_ok=True)

        def started(task: LocalTask) -> None:
            self._current = task

        try:
            outcome = run_with_deadline(
                list(step.argv),
                stdout,
                stderr,
                deadline_s=deadline,
                kill_after_s=kill_after_s,
                env=self._env(),
                cwd=self.out / ".scratch" / "work",
                on_start=started,
            )
        finally:
            self._current = None
        return outcome, str(stdout.relative_to(self.out)), str(stderr.relative_to(self.out))

    @staticmethod
    def _timed_out_reason(deadline: float, outcome: StepOutcome) -> str:
        killed = outcome.unkillable or "its process group was killed"
        return f"deadline of {deadline:.0f} s reached; {killed}"

    # ------------------------------------------------------------ versions

    def _version(self, tool: str, pending: dict[str, Any] | None = None) -> tuple[str | None, list[str] | None]:
        """The tool's version: its version command's output (run once per kit), else the
        pattern on the capture its :class:`VersionProbe` names (old nvidia-smi has no
        ``--version``; nvbandwidth prints its version in its own output), among the steps
        recorded and ``pending`` (the one being recorded)."""
        probe: VersionProbe | None = version_probes().get(tool)
        if probe is None:
            return None, None
        if tool not in self._version_text:
            text = ""
            if (
                probe.argv is not None
                and shutil.which(probe.argv[0], path=self._env().get("PATH"))
                and self._left() > 3
            ):
                out = self.out / "captures" / f"{tool}-version.txt"
                err = self.out / "captures" / f"{tool}-version.stderr.txt"
                run_with_deadline(
                    list(probe.argv),
                    out,
                    err,
                    deadline_s=min(10.0, self._left()),
                    kill_after_s=2,
                    env=self._env(),
                    cwd=self.out / ".scratch" / "work",
                )
                text = _read(out)
            self._version_text[tool] = text
        found = probe.render(self._version_text[tool])
        if found is None and probe.fallback_step:
            seen = [*self.steps, *([pending] if pending else [])]
            rec = next((r for r in seen if r["name"] == probe.fallback_step and r["status"] == "ok"), None)
            found = probe.render(_read(self.out / rec["files"][0])) if rec else None
        return found, list(probe.argv) if probe.argv else None

    # ------------------------------------------------------------ steps

    def capture(self, step: Step) -> dict[str, Any]:
        """Run one capture: ``ok``, ``empty`` (exit 0, no output: ``empty_reason``), ``failed``
        (the tool's own words), ``absent`` (not on PATH), ``timed-out``, ``stopped`` (the kit
        was signalled) or ``not-run``."""
        kill_after = 5.0
        deadline, why = self._gate(step, kill_after)
        if deadline is None:
            return self._not_run(step, why or "not started")
        if not shutil.which(step.argv[0], path=self._env().get("PATH")):
            hint = MISSING_HINT.get(step.tool)
            return self._record(
                step, status="absent", reason=f"{step.argv[0]} not found on PATH" + (f" ({hint})" if hint else "")
            )
        started = _now()
        outcome, out_rel, err_rel = self._execute(step, deadline, kill_after)
        out_text, err_text = _read(self.out / out_rel), _read(self.out / err_rel)
        rec: dict[str, Any] = {
            "exit_code": outcome.exit_code,
            "duration_s": round(outcome.duration_s, 3),
            "deadline_s": round(deadline, 1),
            "started_at": started,
            "files": [out_rel, err_rel],
        }
        dropped = self._invalid_field(step, outcome, err_text)
        if dropped is not None:  # a field this driver does not know: once more without it
            retry = replace(step, argv=dropped[0])
            left = self._left() - kill_after
            if left >= step.min_start_s:
                outcome, out_rel, err_rel = self._execute(retry, min(step.deadline_s, left), kill_after)
                out_text, err_text = _read(self.out / out_rel), _read(self.out / err_rel)
                rec.update(
                    argv=list(retry.argv),
                    requested_argv=list(step.argv),
                    exit_code=outcome.exit_code,
                    duration_s=round(rec["duration_s"] + outcome.duration_s, 3),
                    notes=[f"{dropped[1]!r} is not a valid field on this driver: queried without it"],
                )
        if self._stop_reason:
            rec.update(status="stopped", reason=f"stopped: {self._stop_reason}")
        elif outcome.timed_out:
            rec.update(status="timed-out", reason=self._timed_out_reason(deadline, outcome))
        elif outcome.exit_code != 0:
            rec.update(
                status="failed", reason=f"exit {outcome.exit_code}: {_first_line(err_text, out_text) or 'no output'}"
            )
        elif not out_text.strip():
            rec.update(status="empty", reason=step.empty_reason or "exit 0 but no output")
        else:
            rec.update(status="ok")
            if step.tool == "lspci" and "<access denied>" in out_text:
                rec["notes"] = ["lspci ran without root: capabilities (LnkCap/LnkSta, VPD) show <access denied>"]
        version, version_argv = self._version(step.tool, {"name": step.name, **rec})
        rec.update(version=version, version_argv=version_argv)
        if version is None:
            rec["version_reason"] = f"no version found ({' '.join(version_argv or []) or 'in its output'})"
        return self._record(step, **rec)

    @staticmethod
    def _invalid_field(step: Step, outcome: StepOutcome, err_text: str) -> tuple[tuple[str, ...], str] | None:
        """For a broad ``--query-gpu`` capture that nvidia-smi refused for one field (``Field
        "x" is not a valid field to query.``): the argv without it, and the field."""
        m = re.search(r'Field "([^"]+)" is not a valid field to query', err_text)
        if not step.drop_invalid_fields or outcome.exit_code in (0, None) or not m:
            return None
        out: list[str] = []
        for arg in step.argv:
            if arg.startswith("--query-gpu="):
                fields = [f for f in arg.split("=", 1)[1].split(",") if f != m.group(1)]
                arg = "--query-gpu=" + ",".join(fields)
            out.append(arg)
        return (tuple(out), m.group(1)) if tuple(out) != step.argv else None

    def probe(self, step: Step) -> dict[str, Any]:
        """Run one probe alone: the status and reason of its JSON document (``ok``, ``skip``,
        ``error``), or ``failed`` (no document), ``timed-out``, ``absent``, ``not-run``."""
        kill_after = 5.0
        deadline, why = self._gate(step, kill_after)
        if deadline is None:
            return self._not_run(step, why or "not started")
        script = Path(step.argv[1])
        if not script.is_file():
            return self._record(
                step, status="absent", reason=f"{script.name} not present in this nvtest ({script.parent})"
            )
        if step.needs and not shutil.which(step.needs, path=self._env().get("PATH")):
            return self._record(
                step,
                status="absent",
                reason=f"{step.needs} not found on PATH: not run (the h2d step is the pinned-copy measurement)",
            )
        started = _now()
        outcome, out_rel, err_rel = self._execute(step, deadline, kill_after)
        text = _read(self.out / out_rel).strip()
        rec: dict[str, Any] = {
            "exit_code": outcome.exit_code,
            "duration_s": round(outcome.duration_s, 3),
            "deadline_s": round(deadline, 1),
            "started_at": started,
            "files": [out_rel, err_rel],
        }
        try:
            doc = json.loads(text.splitlines()[-1]) if text else None
        except ValueError:
            doc = None
        if self._stop_reason:
            rec.update(status="stopped", reason=f"stopped: {self._stop_reason}")
        elif outcome.timed_out:
            rec.update(status="timed-out", reason=self._timed_out_reason(deadline, outcome))
        elif not isinstance(doc, dict):
            tail = _last_line(_read(self.out / err_rel))
            rec.update(
                status="failed",
                reason=f"exit {outcome.exit_code}: no JSON document on stdout" + (f": {tail}" if tail else ""),
            )
        else:
            rec.update(
                status=str(doc.get("status")),
                reason=doc.get("reason"),
                version=f"{doc.get('probe')} probe v{doc.get('probe_version')}, {doc.get('library') or 'no library'}",
            )
        return self._record(step, **rec)

    def run(self, step: Step) -> dict[str, Any]:
        """Run one ``nvtest run``: ``ok`` when it ran to its end (exit 0 or 1: the verdict is
        evidence), ``failed`` (exit 2 or 3), ``timed-out`` (what it measured is kept)."""
        kill_after = 15.0
        deadline, why = self._gate(step, kill_after)
        fitted = fit_burnin(step, deadline) if deadline is not None else step
        if deadline is None or fitted is None:
            return self._not_run(
                step, why or f"not started: {deadline or 0:.0f} s left, under 30 s of burn-in plus its checks"
            )
        started = _now()
        outcome, out_rel, err_rel = self._execute(fitted, min(deadline, fitted.deadline_s), kill_after)
        suite_dir = self.out / "runs" / step.name
        latest = suite_dir / "latest"
        if latest.is_symlink():
            latest.unlink()
        run_dirs = sorted(p for p in suite_dir.iterdir() if p.is_dir()) if suite_dir.is_dir() else []
        rec: dict[str, Any] = {
            "argv": list(fitted.argv),
            "exit_code": outcome.exit_code,
            "started_at": started,
            "duration_s": round(outcome.duration_s, 3),
            "deadline_s": round(min(deadline, fitted.deadline_s), 1),
            "version": f"nvtest {__version__}",
            "files": [out_rel, err_rel],
        }
        if fitted is not step:
            rec["effective"] = {
                "duration_s": float(fitted.argv[fitted.argv.index("--duration") + 1]),
                "requested_duration_s": float(step.argv[step.argv.index("--duration") + 1]),
            }
        if run_dirs:
            rec["run_dir"] = str(run_dirs[-1].relative_to(self.out))
            rec["files"].append(rec["run_dir"])
            results = run_dirs[-1] / "results.json"
            if results.is_file():
                rec["verdict"] = (json.loads(_read(results) or "{}").get("summary") or {}).get("verdict")
        if self._stop_reason:
            rec.update(status="stopped", reason=f"stopped: {self._stop_reason}")
        elif outcome.timed_out:
            rec.update(status="timed-out", reason=self._timed_out_reason(min(deadline, fitted.deadline_s), outcome))
        elif outcome.exit_code in (0, 1):
            rec.update(status="ok")
        else:
            err = _last_line(_read(self.out / err_rel)) or _last_line(_read(self.out / out_rel))
            rec.update(status="failed", reason=f"exit {outcome.exit_code}: {err or 'no output'}")
        return self._record(step, **rec)

    # ------------------------------------------------------------ the whole kit

    def _gpu_count(self) -> int:
        """GPUs this process may use: ``nvidia-smi -q -x``'s, no more than ``CUDA_VISIBLE_DEVICES`` lists."""
        text = _read(self.out / "captures" / "nvidia-smi-q-x.xml")
        if not text.strip():
            return 0
        try:
            count = len(nvidia_smi_xml.parse(text).gpus)
        except ParseError:
            return 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            count = min(count, len([d for d in visible.split(",") if d.strip()]))
        return count

    def _fill_versions(self) -> None:
        """Versions a capture could not name when it ran, from the captures taken since (old
        nvidia-smi has no ``--version``: its ``-q`` capture, taken after the plain one, names
        the driver)."""
        for rec in self.steps:
            if rec["group"] != "capture" or rec.get("version") or rec["status"] in ("absent", "not-run"):
                continue
            version, _ = self._version(rec["tool"])
            if version:
                rec["version"] = version
                rec.pop("version_reason", None)
        self._write_manifest()

    def manifest(self) -> dict[str, Any]:
        """The manifest as it stands (every step recorded so far)."""
        return {
            "kit": "nvtest evidence",
            "manifest_version": MANIFEST_VERSION,
            "nvtest_version": __version__,
            "mode": "short" if self.short else "full",
            "host": self._host,
            "started_at": self._started_at,
            "ended_at": _now(),
            "duration_s": round(time.monotonic() - self._t0, 3),
            "budget_s": self.budget_s,
            "python": sys.version.split()[0],
            "python_executable": sys.executable,
            "argv": ["nvtest", *sys.argv[1:]],
            "stopped": self._stop_reason,
            "kit_error": self.kit_error,
            "steps": self.steps,
        }

    def _write_manifest(self) -> None:
        (self.out / "manifest.json").write_text(json.dumps(self.manifest(), indent=2) + "\n", encoding="utf-8")

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop_reason = f"the kit received {signal.Signals(signum).name}"
        if self._current is not None:
            self._current.kill(grace_s=2.0)

    def collect(self) -> dict[str, Any]:
        """Run every step, write manifest.json and summary.md, sanitise OUT; the manifest.

        Raises:
            ConfigError: OUT cannot be used.
        """
        self._prepare()
        self._t0, self._started_at = time.monotonic(), _now()
        self._identities = local_identities()
        self._host = local_hostname()
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for step in capture_steps():
                self.capture(step)
            self._fill_versions()
            for step in probe_steps(probes_dir(), short=self.short, gpus=self._gpu_count()):
                self.probe(step)
            for step in run_steps(self.out, short=self.short):
                self.run(step)
        except Exception as exc:  # what was taken is still summarised and sanitised
            self.kit_error = f"{type(exc).__name__}: {exc}"
            self._stop_reason = f"the kit failed: {self.kit_error}"
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
        return self._finish()

    def _finish(self) -> dict[str, Any]:
        manifest = self.manifest()
        (self.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        try:
            summary = render_summary(self.out, manifest, load_catalog())
        except (NvtestError, OSError, ValueError) as exc:
            summary = f"# GPU evidence\n\nThe summary could not be written: {type(exc).__name__}: {exc}\n"
        (self.out / "summary.md").write_text(summary, encoding="utf-8")
        shutil.rmtree(self.out / ".scratch", ignore_errors=True)
        report = Sanitiser(self._identities).tree(self.out)
        manifest = json.loads(_read(self.out / "manifest.json"))
        manifest["sanitised"] = report.as_dict()
        (self.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.replaced.items())) or "nothing to replace"
        removed = f"; removed {len(report.removed)} file(s) that cannot be sanitised" if report.removed else ""
        with (self.out / "summary.md").open("a", encoding="utf-8") as fh:
            fh.write(f"\nSanitised {report.files} files (distinct values replaced: {counts}){removed}.\n")
        return manifest
