"""zeus-plugins-postgres: job stores in a PostgreSQL database (``job.store = "postgresql://..."``)."""
