{#- DuckDBEngine: the table a stage creates, dropped first if an earlier job on the same
    engine left it (an engine runs any number of jobs; each stage makes its table anew).
    {{ table }} comes from the engine's code, never from user input. DuckDB only. -#}
DROP TABLE IF EXISTS {{ table }}
