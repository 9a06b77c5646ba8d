"""The data pipeline: bulk routing, route-change impact, traffic analytics and a
synthetic workload, on DuckDB or Spark from the same SQL templates. What each job reads and
writes, the engines' memory and the errors are in ``pybroker pipeline [JOB] --help``
(pybroker.cli.pipeline); the exported tables are defined once in ``schema``."""
