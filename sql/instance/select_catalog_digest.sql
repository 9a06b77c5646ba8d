-- The digest of the catalog definitions the file holds (migrations/016).
SELECT digest FROM catalog_definitions
