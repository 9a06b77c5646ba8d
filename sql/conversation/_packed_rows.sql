{#- The rows of a batch packed in $rows as pybroker/core/conversation/columns.py's packed() makes
    them (values joined by ',', rows by ';'), as rows of one list each: r[1], r[2], ... are
    a row's values in the order they were packed (insert_queue_messages.sql and its kin).
    UNNEST is the table function here, not string_split(UNNEST(...)) in the select list:
    DuckDB 1.5.6 binds an UNNEST nested in another function by printing the expression,
    the bound $rows (the whole batch) with it: 1.5-4 ms, a third, of a 1,000-row insert's CPU. -#}
(SELECT string_split(x, ',') AS r FROM UNNEST(string_split($rows, ';')) AS t(x))
