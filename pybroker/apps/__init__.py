"""Applications built on the public API: the configuration service, the Spark pipeline."""
