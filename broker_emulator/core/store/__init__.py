"""Broker storage: commit log, consume queues, consumer offsets (RocketMQ's model)."""
