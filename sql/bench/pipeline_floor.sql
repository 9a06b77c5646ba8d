{#- `pybroker bench pipeline`: the floor the resolve job is compared with in the same run:
    the same conversations read and as many rows of the decisions' eleven columns written,
    with nothing decided. Each decision column copies an input column of a like number of
    distinct values (origin: a few; service name: about one per route; broker identifier:
    mostly NULL). Input: {{ conversations }}. -#}
SELECT
    c.conversation_id,
    c.origin AS outcome,
    c.service_name AS route,
    c.origin AS address,
    c.broker_instance AS mirror_address,
    c.origin AS "database",
    c.broker_instance AS broker_instance,
    c.origin AS match_step,
    c.origin AS choose_step,
    c.broker_instance AS locate_step,
    c.origin AS decided_by
FROM {{ conversations }} AS c
