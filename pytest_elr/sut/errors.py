"""Errors of the system under test; each names the cause and the fix."""

from __future__ import annotations


class SutError(Exception):
    """Base class for every error raised by :mod:`pytest_elr.sut`."""


class BuildStepError(SutError):
    def __init__(self, step: str, cause: str, hint: str = "") -> None:
        self.step, self.cause, self.hint = step, cause, hint
        msg = f"image build step '{step}' failed: {cause}"
        super().__init__(msg + (f"\nfix: {hint}" if hint else ""))


class UnknownKafkaVersionError(SutError):
    pass


class ImageMissingError(SutError):
    pass


class EngineNotRunningError(SutError):
    pass


class PortClashError(SutError):
    pass


class ClusterStartError(SutError):
    """The cluster was not ready in time; carries each node's last log lines."""

    def __init__(self, message: str, node_logs: dict[str, str] | None = None) -> None:
        self.node_logs = node_logs or {}
        parts = [message]
        for name, text in self.node_logs.items():
            parts.append(f"--- last log lines of {name} ---\n{text.rstrip()}")
        super().__init__("\n".join(parts))


class KafkaProtocolError(SutError):
    """A Kafka request failed (connection, decoding, or a non-zero error code)."""

    def __init__(self, message: str, error_code: int | None = None) -> None:
        self.error_code = error_code
        super().__init__(message)


class ToxiproxyError(SutError):
    pass


class NodeCommandError(SutError):
    """A `kafka-ctl` command inside a node container failed."""


class KafkaDistError(SutError):
    """A Kafka distribution (``--elr-kafka-dist``) that cannot be used; names the path and what was expected."""
