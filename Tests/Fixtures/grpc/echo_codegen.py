"""Generates the Python code for echo.proto into a private temporary directory
(removed at exit) and imports it: nothing generated is kept in the repository,
and the code always matches the .proto beside this file."""
import atexit
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    """Returns (echo_pb2, echo_pb2_grpc)."""
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="assertgate-grpc-gen-")
    atexit.register(shutil.rmtree, out, True)
    status = protoc.main([
        "grpc_tools.protoc", "-I" + HERE, "--python_out=" + out, "--grpc_python_out=" + out,
        os.path.join(HERE, "echo.proto"),
    ])
    if status != 0:
        raise SystemExit("protoc failed on echo.proto (status %d)" % status)
    # echo_pb2_grpc imports echo_pb2 by its bare name.
    sys.path.insert(0, out)
    import echo_pb2
    import echo_pb2_grpc
    return echo_pb2, echo_pb2_grpc
