"""``torch.distributed.nn`` for protoref's workers: :class:`RemoteModule`."""

from protoref.nn.remote_module import RemoteModule

__all__ = ["RemoteModule"]
