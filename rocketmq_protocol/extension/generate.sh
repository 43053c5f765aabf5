#!/usr/bin/env bash
# Regenerates the extension-service stubs (run after editing emulator_v1.proto).
set -euo pipefail
cd "$(dirname "$0")"
python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. emulator_v1.proto
sed -i 's/^import emulator_v1_pb2 as/from . import emulator_v1_pb2 as/' emulator_v1_pb2_grpc.py
