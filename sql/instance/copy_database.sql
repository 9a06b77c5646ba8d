-- Every table, view, macro and sequence of one attached database copied into another, as
-- the transaction it runs in sees them (a snapshot). COPY FROM DATABASE takes no bound
-- parameter: both names are quoted identifiers made by the `identifier` filter.
COPY FROM DATABASE {{ source | identifier }} TO {{ target | identifier }}
