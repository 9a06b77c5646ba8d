-- The digest of the catalog definitions just installed (migrations/016; one row).
INSERT OR REPLACE INTO catalog_definitions (singleton, digest, installed_at)
VALUES (TRUE, $digest, $installed_at)
