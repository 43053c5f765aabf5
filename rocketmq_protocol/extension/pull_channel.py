"""The emulator's pull channel: BulkPull carried in RocketMQ remoting frames over plain TCP, on the broker's
remoting port (emulator_v1.proto, PullChannelResponse). The request's body is a serialized BulkPullRequest;
a SUCCESS response's body is the serialized BulkPullResponse (`bulk_pull_wire`), as gRPC's BulkPull answers.
gRPC's Python transport costs ~0.8 ns per received byte on this machine against ~0.2 for a socket read
into one buffer (`benchmarks/grpc_floor.py`), and a bulk pull is megabytes."""

# A request code outside Apache RocketMQ's (RequestCode), so no real broker mistakes it for one of its own: a
# broker without the channel answers REQUEST_CODE_NOT_SUPPORTED.
BULK_PULL_CODE = 50001
