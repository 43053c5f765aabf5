"""gRPC metadata keys of apache.rocketmq.v2 requests (as the official clients send them), and the one this
project adds."""

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
CLIENT_VERSION_HEADER = "x-mq-client-version"
PROTOCOL_HEADER = "x-mq-protocol"
REQUEST_ID_HEADER = "x-mq-request-id"
NAMESPACE_HEADER = "x-mq-namespace"
#: Set to "true" by a client whose SendMessage names the queue in `system_properties.queue_id`
#: (proto3 cannot tell queue_id 0 from unset); the emulator then stores each message in that queue.
EXPLICIT_QUEUE_HEADER = "x-mq-queue-id-explicit"
