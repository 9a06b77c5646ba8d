-- The broker endpoint this process listens on (migrations/019; pybroker/kernel/live_views.py).
INSERT INTO broker_listeners (address, is_encryption_enabled, since)
VALUES ($address, $is_encryption_enabled, $since)
