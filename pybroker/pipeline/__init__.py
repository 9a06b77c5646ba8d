"""The data pipeline: bulk routing, route-change impact, traffic analytics and a
synthetic workload, on DuckDB or Spark from the same SQL templates. See ``pybroker
pipeline --help`` and README's "Pipeline" section."""
