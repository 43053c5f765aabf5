"""What the connector and the broker emulator both need of RocketMQ's wire: the v2 gRPC stubs, the emulator's
extension service, the remoting codec, and the rules both sides apply (hashing, limits, names, signatures,
send validation, the Arrow layout of messages). It imports neither `connector` nor `broker_emulator`."""
