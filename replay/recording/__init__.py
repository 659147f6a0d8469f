"""What a replay writes: request records, Parquet part files and their reader, shard merges, schedule lag, the
summary and progress."""
