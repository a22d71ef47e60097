"""torch.distributed.rpc.functions: :func:`async_execution`."""

from protoref.rpc.udf import async_execution

__all__ = ["async_execution"]
