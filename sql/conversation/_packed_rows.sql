{#- The rows of a batch packed in $rows as pybroker/conversation/columns.py's packed() makes
    them (values joined by ',', rows by ';'), as rows of one list each: r[1], r[2], ... are
    a row's values in the order they were packed (insert_queue_messages.sql and its kin). -#}
(SELECT string_split(UNNEST(string_split($rows, ';')), ',') AS r)
