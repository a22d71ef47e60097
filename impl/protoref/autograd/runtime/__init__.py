"""Distributed autograd over real workers: the scalar engine, one node per worker, the
``torch.distributed.autograd`` API, an in-process world, and the glue to :mod:`protoref.rpc`."""
