"""What a replay writes: request records, Parquet part files, shard merges, the summary and progress."""
