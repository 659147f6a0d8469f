"""The open-loop load generator. Rooms: clients/ (one per backend, behind a registry), schedule/ (when each
request goes out), recording/ (what a replay writes); what they share sits here: clock.py, and prepared_request.py
with its answer_check.py. runner.py ties them into one replay, replay_config.py is what it is told. It talks to
endpoints only over HTTP."""
