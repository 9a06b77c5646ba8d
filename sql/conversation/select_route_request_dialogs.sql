-- R8.2: every route request dialog of the instance, with its database's name: the
-- delay/retry loop looks at each (a handful: one per missing service and database).
SELECT q.database_id, d.name, q.service_name, q.conversation_handle, q.retry_at
FROM route_request_dialogs AS q
JOIN databases AS d ON d.database_id = q.database_id
ORDER BY q.database_id, q.service_name
