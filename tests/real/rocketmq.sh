#!/usr/bin/env bash
# Real Apache RocketMQ by hand (what the realbroker tests use): fetch its jars with Maven into
# ~/.cache/pyspark-rocketmq/maven/ and start a name server, broker and (5.x) proxy on free loopback ports.
#   tests/real/rocketmq.sh fetch                  # 5.x and 4.9.x jars into the cache
#   tests/real/rocketmq.sh start [--version 4.9.7] [--brokers 2] [--topic orders:8[:FIFO]]   # until Ctrl-C
#   tests/real/rocketmq.sh versions
exec "${PYTHON:-python}" "$(dirname "$0")/realcluster.py" "$@"
