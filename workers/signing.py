"""Signatures on the records of the distributed mode: every verdict and progress event.

A worker publishes what its jobs did to Redis (workers.jobstore), and the web side reads
it from there. Anyone who can write to that Redis could otherwise put a verdict of their
own choosing in front of the web side. So every record carries an HMAC-SHA256 under the
deployment's result key, a worker setting that the web app and the worker processes
hold and evaluation children never receive (workers.limits passes the engine's settings
only). The web side drops, with a warning naming the job, a record whose signature is
missing or wrong.

What is signed, as one JSON array of strings: a version tag, the deployment's key
prefix, the kind of record ("result" or "event"), the job id, and the record's data
exactly as it is stored. A record therefore cannot be moved to another job, another
kind or another deployment on the same Redis without its signature failing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

from kplay.config import WorkerSettings

MIN_KEY_CHARS = 32
KEY_VARIABLE = WorkerSettings.env_name("result_key")
HOW_TO_MAKE_ONE = "python -c 'import secrets; print(secrets.token_hex(32))'"
_VERSION = "kplay-record/1"

log = logging.getLogger(__name__)


class MissingResultKey(RuntimeError):
    """The distributed mode was asked for without a usable result key."""


def result_key(settings: WorkerSettings) -> bytes:
    """The key of `settings`, or MissingResultKey saying what to do (never the key itself)."""
    secret = settings.result_key
    if secret is None:
        raise MissingResultKey(
            f"{KEY_VARIABLE} is not set: the distributed mode signs every verdict a worker "
            "publishes and the web app rejects unsigned ones. Make a key with "
            f"`{HOW_TO_MAKE_ONE}` and give the same value to the web app and every worker."
        )
    value = secret.get_secret_value()
    if len(value) < MIN_KEY_CHARS:
        raise MissingResultKey(
            f"{KEY_VARIABLE} is too short ({len(value)} characters; at least {MIN_KEY_CHARS}). "
            f"Make one with `{HOW_TO_MAKE_ONE}`."
        )
    return value.encode()


class Signer:
    """Signs and checks the records of one deployment (its key and its key prefix)."""

    def __init__(self, key: bytes, scope: str) -> None:
        if len(key) < MIN_KEY_CHARS:
            raise MissingResultKey(f"a result key needs at least {MIN_KEY_CHARS} characters")
        self._key = key
        self.scope = scope

    @classmethod
    def for_settings(cls, settings: WorkerSettings) -> Signer:
        return cls(result_key(settings), settings.key_prefix)

    def sign(self, kind: str, job_id: str, data: str) -> str:
        message = json.dumps([_VERSION, self.scope, kind, job_id, data], separators=(",", ":"))
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def verify(self, kind: str, job_id: object, data: object, signature: object) -> bool:
        """Whether `signature` is this deployment's for exactly this record."""
        if not all(isinstance(v, str) for v in (job_id, data, signature)):
            return False
        expected = self.sign(kind, str(job_id), str(data))
        return hmac.compare_digest(expected.encode(), str(signature).encode())

    def check(self, kind: str, job_id: object, data: object, signature: object) -> bool:
        """verify(), with a warning naming the job for a record that fails."""
        if self.verify(kind, job_id, data, signature):
            return True
        log.warning(
            "ignored a %s record for job %s on Redis: its signature is %s",
            kind,
            job_id,
            "missing" if signature is None else "not this deployment's",
        )
        return False
