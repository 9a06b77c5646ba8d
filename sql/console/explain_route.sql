-- the console's routes: how the routing process decides a service from a database (R2-R4)
SELECT step, description, candidates, result
FROM route_explain($origin, $service_name)
