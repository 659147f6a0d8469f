# Shared fixtures: a throwaway PostgreSQL cluster (postgres_cluster, postgres_database).
pytest_plugins = ["postgres_cluster"]
