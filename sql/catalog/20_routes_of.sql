-- routes_of('AdventureWorks2008R2'): one database's routing table, like <db>.sys.routes.
CREATE OR REPLACE MACRO routes_of(of_database) AS TABLE
SELECT r.name, r.route_id, r.remote_service_name, r.broker_instance, r.lifetime, r.address,
    r.mirror_address, r.is_expired, r.create_date
FROM sys.routes AS r
WHERE r.database_name = of_database
