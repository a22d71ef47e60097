"""Distributed autograd (Reference variant of spec/autograd/DistAutograd.tla)."""
