{#-
  routes_of('AdventureWorks2008R2'): one database's routing table, like <db>.sys.routes.
  A name that is no database of the instance raises, naming the databases.
-#}
{% from 'catalog/_known_names.sql' import known_database %}
CREATE OR REPLACE MACRO routes_of(of_database) AS TABLE
SELECT r.name, r.route_id, r.remote_service_name, r.broker_instance, r.lifetime, r.address,
    r.mirror_address, r.is_expired, r.create_date
FROM (SELECT {{ known_database('routes_of', 'of_database', 'database') }} AS name) AS d
JOIN sys.routes AS r ON r.database_name = d.name
