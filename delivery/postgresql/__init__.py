"""Django's PostgreSQL backend with a health check that costs no round trip (`ENGINE: "delivery.postgresql"`, which
`delivery.db_config.database()` sets): delivery/postgresql/base.py."""
