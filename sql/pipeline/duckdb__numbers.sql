{#-
  The numbers 0 .. $count - 1 as column n, for the generate templates. DuckDB only: Spark
  builds the same relation with spark.range(), which has no equivalent spelling in
  DuckDB SQL (sqlglot leaves DuckDB's range() as an unknown table function on Spark).
-#}
SELECT r.range AS n FROM range(CAST($count AS BIGINT)) AS r
