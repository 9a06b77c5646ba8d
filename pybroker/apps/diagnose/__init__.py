"""Diagnosis of a broker network (``pybroker diagnose``, ``pybroker.diagnose``): every
instance named is read through the analysts' read paths and checked against rules kept as
data (rules.py); pybroker/docs/diagnose.md documents every finding's code."""
