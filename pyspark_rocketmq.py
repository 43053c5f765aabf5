"""Exposes `DefaultSource` so Spark registers `format("rocketmq")` with no `register()` call
(Spark imports every top-level `pyspark_*` module and registers its `DefaultSource`)."""

from connector.datasource import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
