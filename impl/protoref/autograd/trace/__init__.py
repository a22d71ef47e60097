"""Trace events of distributed autograd: the actions' parameters (:mod:`.args`) and one event
model per DistAutograd.tla action (:mod:`.events`)."""
