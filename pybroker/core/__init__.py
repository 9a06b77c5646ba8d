"""Cores that import nothing above them: routing, the wire, conversation states, T-SQL."""
