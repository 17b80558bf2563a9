"""Errors a user can fix. The CLI prints them without a traceback and exits with their code."""

from __future__ import annotations


class HpoError(Exception):
    """A problem with the user's input or environment; `exit_code` is what the CLI returns."""

    exit_code = 1


class ConfigError(HpoError):
    """A bad run or study file, a bad `--set`, or a bad command-line value: exit 2 (usage)."""

    exit_code = 2


class Interrupted(HpoError):
    """A stop the user asked for (Ctrl-C, SIGTERM): exit 130, the shell's code for an interrupted command. The message
    says what was saved and how to continue."""

    exit_code = 130


class StorageUnreachable(HpoError):
    """The study's storage did not answer for `storage.outage_timeout`: exit 75 (EX_TEMPFAIL, "try again later"), for
    a scheduler or a script that reruns the command. The message says for how long and that a rerun continues."""

    exit_code = 75


class StoppedWaiting(Interrupted):
    """A stop asked for (SIGTERM, Ctrl-C) while a call waited out a storage outage (hpo.storage.outage): the call gives
    up at once rather than hold the stop until the storage answers. Exit 130, as any stop."""
