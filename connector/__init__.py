"""pyspark-rocketmq connector: the `rocketmq` Python data source (reader, writer) and the RocketMQ clients they
talk to (`connector.clients`)."""
