#!/usr/bin/env bash
# Regenerates querator/http/proto/*_pb2.py(i) from the .proto files beside them.
# Needs grpcio-tools (a dev dependency); the package itself needs only the
# protobuf runtime. tests/http_api/test_proto_files.py fails when they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
"$python" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. querator/http/proto/*.proto
