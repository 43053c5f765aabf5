"""gRPC services of the emulator: apache.rocketmq.v2.MessagingService and the rocketmq_emulator.v1 extension."""
