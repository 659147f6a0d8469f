"""The Parquet lake: partitioned part files, their audit, the integrity check, quarantine and locks."""
