-- P8: how many arrivals wait in a receiving database's transmission queue.
SELECT count(*) FROM transmission_queue AS t WHERE t.is_inbound
