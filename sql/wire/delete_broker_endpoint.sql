-- DROP ENDPOINT.
DELETE FROM broker_endpoints
