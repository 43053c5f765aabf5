"""pyspark-rocketmq connector: the `rocketmq` Python data source (reader, writer, client)."""
