"""run.json: the RunInfo of a replay, next to its requests.parquet.

Written at t0 with partial=true and rewritten at the end with partial=false, each time atomically
(temporary file + rename) so a reader never sees half a file. Its server_info keeps only the fields
costbench reads (common/server_info_fields.py), whichever path built the RunInfo, and all of it passes
through redaction/secret_redaction.py, so no secret the server echoed (or a URL carried) reaches the file.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from common.atomic_file import write_bytes_atomically
from common.run_folder import RUN_FILE
from common.server_info_fields import keep_read_fields
from redaction.secret_redaction import redact_secrets
from replay.recording.records import RunInfo


def write_run_json(out_dir: Path, run: RunInfo) -> Path:
    body = run.to_dict()
    body["server_info"] = keep_read_fields(body["server_info"])
    body = redact_secrets(body)
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    return write_bytes_atomically(Path(out_dir) / RUN_FILE, data)


def read_run_json(out_dir: Path) -> RunInfo:
    path = Path(out_dir) / RUN_FILE
    raw = orjson.loads(path.read_bytes())
    try:
        return RunInfo(**raw)
    except TypeError as exc:
        raise ValueError(f"{path}: not a costbench run.json ({exc})") from None
