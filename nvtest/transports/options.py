"""The option sets of the SSH and Slurm transports, each described once.

A transport's user-settable options are the fields of one frozen dataclass
(:class:`SshOptions`, :class:`SlurmOptions`); each field's metadata
(:class:`OptionInfo`) says its command-line flag and help and, for Slurm job
options, the ``srun``/``salloc``/``sbatch`` flag it becomes. Everything else is
generated from these descriptions:

- the ``nvtest run|submit|inventory|skus match`` options (:mod:`nvtest.cli.options`),
- the keyword options the transports take (``SSHTransport(**ssh.as_kwargs())``),
- the Slurm job options of every generated command line and batch script
  (:func:`slurm_job_argv`),
- ``run_config.json``'s ``backend_options`` and what ``--rerun-failed`` takes back
  from an earlier run (:func:`cli_param_of`).

An unknown option name fails with the list of the valid ones (:func:`build_options`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from nvtest.errors import ConfigError

__all__ = [
    "OptionInfo",
    "SlurmOptions",
    "SshOptions",
    "build_options",
    "cli_param_of",
    "option_infos",
    "slurm_job_argv",
]


@dataclass(frozen=True)
class OptionInfo:
    """What one option field is on the command line and, for Slurm, in a job's argv.

    Attributes:
        help: the command-line help text (without the ``ssh:``/``slurm:`` prefix).
        param: the CLI parameter name when it differs from the field name
            (``connect_timeout`` for ``connect_timeout_s``).
        flag: the CLI flag when it is not derived from ``param`` (``--time``).
        job_flag: the Slurm job option it becomes (``--partition``); None: not a
            job option of salloc/sbatch/srun.
        path: a file path on the command line, stored resolved as a string.
    """

    help: str
    param: str | None = None
    flag: str | None = None
    job_flag: str | None = None
    path: bool = False


def _opt(default: Any, help: str, **info: Any) -> Any:
    return field(default=default, metadata={"nvtest": OptionInfo(help=help, **info)})


@dataclass(frozen=True)
class SshOptions:
    """Options of :class:`~nvtest.transports.ssh.SSHTransport` a user sets.

    Attributes:
        parallel: at most this many nodes at once.
        connect_timeout_s: TCP connect + SSH handshake timeout, seconds.
        insecure_host_keys: accept unknown or changed host keys (warned in the report).
        ssh_config: OpenSSH client config file (default ``~/.ssh/config``).
        known_hosts: known_hosts file (default ``~/.ssh/known_hosts``).
        connect_retries: connection attempts after the first (never for commands).
    """

    parallel: int = _opt(64, "at most this many nodes at once.")
    connect_timeout_s: float = _opt(10.0, "connect timeout, seconds.", param="connect_timeout")
    insecure_host_keys: bool = _opt(False, "accept unknown host keys (warned in the report).")
    ssh_config: str | None = _opt(None, "OpenSSH client config (default ~/.ssh/config).", path=True)
    known_hosts: str | None = _opt(None, "known_hosts file (default ~/.ssh/known_hosts).", path=True)
    connect_retries: int = _opt(2, "connection attempts after the first (never for commands).")

    def as_kwargs(self) -> dict[str, Any]:
        """Every field as a keyword argument of the transport."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SlurmOptions:
    """Job options a run passes to Slurm; None / False means Slurm's default.

    The long ``--option=value`` forms of Slurm 22.05's ``srun``/``salloc``/``sbatch``
    (stable since Slurm 20.11).

    Attributes:
        partition: ``--partition``.
        time_limit: ``--time`` of an allocation or batch job, in any Slurm
            format (``30``, ``1:00:00``, ``1-00:00:00``).
        account: ``--account``.
        reservation: ``--reservation``.
        qos: ``--qos``.
        exclusive: ``--exclusive`` (whole nodes).
        gpus_per_node: ``--gpus-per-node``.
        mpi: ``srun --mpi`` plugin of multi-node launches (``pmix``, ``pmi2``).
        container_image: ``srun --container-image`` (pyxis) of multi-node launches
            (NCCL, MPI, the ``container_identity`` check); per-node probes run on the host.
        container_mounts: ``srun --container-mounts`` of those launches.
        image_id: the identity every rank of those launches must report from inside the
            image (``/etc/nvtest-image-id`` or ``$NVTEST_IMAGE_ID``; ``container_identity``).
    """

    partition: str | None = _opt(None, "partition.", job_flag="--partition")
    time_limit: str | None = _opt(None, "allocation time limit.", flag="--time", job_flag="--time")
    account: str | None = _opt(None, "account.", job_flag="--account")
    reservation: str | None = _opt(None, "reservation.", job_flag="--reservation")
    qos: str | None = _opt(None, "QOS.", job_flag="--qos")
    exclusive: bool = _opt(False, "exclusive node allocation.", job_flag="--exclusive")
    gpus_per_node: int | None = _opt(None, "GPUs per node to allocate.", job_flag="--gpus-per-node")
    mpi: str | None = _opt(None, "srun --mpi plugin (pmix, pmi2).")
    container_image: str | None = _opt(
        None, "pyxis --container-image of multi-node launches (per-node probes stay on the host)."
    )
    container_mounts: str | None = _opt(None, "pyxis --container-mounts of those launches.")
    image_id: str | None = _opt(None, "identity every rank must report from inside the image (/etc/nvtest-image-id).")

    def as_kwargs(self) -> dict[str, Any]:
        """The fields that are set (not None, not False), as transport keyword arguments."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, False)}


OptionsT = TypeVar("OptionsT", SshOptions, SlurmOptions)


def option_infos(cls: type[SshOptions] | type[SlurmOptions]) -> list[tuple[dataclasses.Field[Any], OptionInfo]]:
    """The fields of an option set with their :class:`OptionInfo`, in declaration order."""
    return [(f, f.metadata["nvtest"]) for f in dataclasses.fields(cls)]


def cli_param_of(cls: type[SshOptions] | type[SlurmOptions]) -> dict[str, str]:
    """Field name -> the CLI parameter that sets it (``connect_timeout_s`` -> ``connect_timeout``)."""
    return {f.name: info.param or f.name for f, info in option_infos(cls)}


def build_options(cls: type[OptionsT], values: Mapping[str, Any], *, where: str = "options") -> OptionsT:
    """An option set from field-name keyed ``values`` (path fields resolved to strings).

    Raises:
        ConfigError: a name that is not an option of ``cls``, with the valid ones.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(names)}", field=where)
    kw: dict[str, Any] = {}
    for f, info in option_infos(cls):
        if f.name not in values:
            continue
        v = values[f.name]
        if info.path and v is not None:
            v = str(Path(v).expanduser().resolve())
        kw[f.name] = v
    return cls(**kw)


def slurm_job_argv(opts: SlurmOptions, *, time_limit: str | None) -> list[str]:
    """The Slurm job options of ``opts`` as argv (``--partition=P``, ``--exclusive``, ...).

    ``time_limit`` replaces ``opts.time_limit`` (a step's own ``--time`` in minutes).
    """
    argv: list[str] = []
    for f, info in option_infos(SlurmOptions):
        if info.job_flag is None:
            continue
        value = time_limit if f.name == "time_limit" else getattr(opts, f.name)
        if value in (None, False, ""):
            continue
        argv.append(info.job_flag if value is True else f"{info.job_flag}={value}")
    return argv
