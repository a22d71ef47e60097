"""protoref: executable reference implementations of PyTorch's distributed protocols.

Each protocol (RRef lifecycle, dynamic rendezvous, distributed autograd context) is a sans-IO
core driven by a deterministic simulator or a real runtime; see docs/ for the design.
"""

__all__: list[str] = []
