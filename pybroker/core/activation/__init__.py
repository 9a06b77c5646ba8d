"""Internal activation (SQL Server's queue activation, SPEC C3): a queue names a Python
callable as its activation procedure, and a queue monitor per activated queue starts
readers, which call it, when messages arrive.

monitor.py is the sans-I/O queue monitor (takes ``now``, starts nothing itself);
procedure.py checks the ACTIVATION settings and imports the callable; runner.py drives the
monitors and runs the readers in threads (``Instance.start_activation()``).
"""
