"""Where runs are kept and read. Rooms: parquet/ (the lake's files and their integrity), backends/ (the DuckDB
file and DuckLake catalogs over that lake), marts/ (run rows, prices, the marts' build and readers), sql/
(every view and mart, in SQL), report/ (the weekly report), notebook/ (the analyst's marimo notebook); here: the
quality suites, the column docs and the reader of the SQL files."""
