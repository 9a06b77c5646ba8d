"""Diagnosis of a broker network (``pybroker diagnose``, ``pybroker.diagnose``): every
instance named is read through the analysts' read paths and checked against rules kept as
data (rules.py); pybroker/docs/diagnose.md documents every finding's code. The same reads
follow one conversation across the instances (trace.py, ``pybroker trace``) and draw the
network with the findings on it (topology.py, drawing.py: ``pybroker topology``)."""
