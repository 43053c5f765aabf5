"""`failOnDataLoss`: fail with `DataLossError` or log a warning and carry on (Kafka's `reportDataLoss`)."""

from __future__ import annotations

import logging

from .errors import DataLossError

log = logging.getLogger(__name__)

_FAIL_HINT = (
    "Some data may have been lost: it was removed by the broker's retention, or the queue was deleted or "
    "reset before it was read. To skip lost data and continue, set option 'failOnDataLoss'='false'."
)
_WARN_HINT = "Some data may have been lost; continuing because option 'failOnDataLoss'='false'."


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raises DataLossError(message) when `fail_on_data_loss`, else logs it as a warning."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {_FAIL_HINT}")
    log.warning("%s. %s", message, _WARN_HINT)
