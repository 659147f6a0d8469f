"""The analyst's notebook (`make notebook`): a marimo app on the warehouse, read-only. Rooms: example_questions
(the docs' example queries, read from warehouse/sql/ as they are now), notebook_plots (a plot of a query's answer),
read_only_connection (the warehouse opened read-only, or what to do when there is none yet) and analyst_notebook
(the marimo app)."""
