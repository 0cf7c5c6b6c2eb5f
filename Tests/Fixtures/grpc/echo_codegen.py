"""Generates the Python code for echo.proto into a private temporary directory,
imports it and removes the directory: nothing generated is kept in the
repository or left in /tmp, and the code always matches the .proto beside
this file. The directory goes as soon as the modules are loaded, not at exit:
the services are stopped with SIGTERM, which skips `atexit`."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    """Returns (echo_pb2, echo_pb2_grpc)."""
    out = tempfile.mkdtemp(prefix="assertgate-grpc-gen-")
    try:
        return _generate_and_import(out)
    finally:
        if out in sys.path:
            sys.path.remove(out)
        shutil.rmtree(out, True)


def _generate_and_import(out):
    from grpc_tools import protoc

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
