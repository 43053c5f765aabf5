"""The emulator's pull channel: BulkPull and SendMessage carried in RocketMQ remoting frames over plain TCP, on
the broker's remoting port (emulator_v1.proto, PullChannelResponse). A BulkPull request's body is a serialized
BulkPullRequest; a SUCCESS response's body is the serialized BulkPullResponse (`bulk_pull_wire`), as gRPC's
BulkPull answers. A SendMessage request's body is a serialized v2 SendMessageRequest and its ext fields are
the gRPC call's metadata (client id, explicit queue); a SUCCESS response's body is the SendMessageResponse.
gRPC's Python transport costs ~0.8 ns per received byte on this machine against ~0.2 for a socket read
into one buffer (`benchmarks/grpc_floor.py`), and a bulk pull or a writer's send is megabytes."""

# A request code outside Apache RocketMQ's (RequestCode), so no real broker mistakes it for one of its own: a
# broker without the channel answers REQUEST_CODE_NOT_SUPPORTED.
BULK_PULL_CODE = 50001
SEND_MESSAGE_CODE = 50002
