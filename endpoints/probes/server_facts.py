"""What a healthy SGLang server says about itself (/server_info, /model_info, version), fetched the
same way for launch, attach and sim, and saved with the run as `server_facts.json`.

Plain urllib (blocking): provisioning runs before the replay's event loop exists. Errors say which
URL and what came back, so "not an SGLang server" and "nothing listens there" read differently.
Of /server_info only the fields costbench reads are kept (common/server_info_fields.py); a field
nothing reads is not in the file at all. Secrets a server echoes (SGLang has sent `api_key` in
/server_info) are redacted as the answers arrive, and the saved file is redacted again as a whole
(redaction/secret_redaction.py: the rule, by name and by shape).

Each answer is bounded (endpoints/probes/endpoint_get.py; docs/endpoints.md, "Bounds on what an endpoint
sends"): FACTS_LIMIT_S in total time, FACTS_MAX_BYTES in bytes, MAX_JSON_DEPTH in nesting.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from common.run_folder import SERVER_FACTS_FILE as SERVER_FACTS_FILE  # re-exported: the owner is common/run_folder.py
from common.server_info_fields import JsonTooDeepError, keep_read_fields, load_shallow_json
from endpoints.probes.endpoint_get import HttpAnswer as HttpAnswer  # re-exported: the owner is endpoint_get.py
from endpoints.probes.endpoint_get import http_get as http_get
from endpoints.spec import EndpointSpec
from redaction.secret_redaction import redact_secrets

# Newer SGLang (and sglang_router) serve /server_info; older builds and routers only the aliases.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
FACTS_LIMIT_S = 10.0  # each answer, connecting to the last byte
FACTS_MAX_BYTES = 1024 * 1024  # far above SGLang's /server_info, one internal_states entry per DP rank included


class NotSglangError(RuntimeError):
    """The URL answers, but not like an SGLang server (or router)."""


class UnreachableError(RuntimeError):
    """Nothing usable answers at the URL (refused, timed out, DNS)."""


def auth_headers(spec: EndpointSpec) -> dict[str, str]:
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


def health_status(url: str, headers: dict[str, str], timeout_s: float = 25.0) -> HttpAnswer:
    # SGLang's own health check waits up to 20 s (SGLANG_HEALTH_CHECK_TIMEOUT) before it says 503.
    return http_get(f"{url}/health_generate", headers, timeout_s)


def _json_object(
    url: str, paths: tuple[str, ...], headers: dict[str, str], required: str, timeout_s: float = FACTS_LIMIT_S
) -> dict:
    problems = []
    for path in paths:
        answer = http_get(url + path, headers, timeout_s, max_bytes=FACTS_MAX_BYTES)
        if answer.status is None:
            raise UnreachableError(f"nothing answers at {url}{path} ({answer.problem})")
        if answer.status == 401:
            raise NotSglangError(f"{url}{path} answered 401 Unauthorized: set the variable api_key_env names")
        if answer.status != 200:
            problems.append(f"{path}: HTTP {answer.status}")
            continue
        try:
            body = load_shallow_json(answer.body)
        except JsonTooDeepError as exc:
            problems.append(f"{path}: {exc}")
            continue
        except ValueError:
            kind = answer.content_type.split(";")[0] or "no content type"
            problems.append(f"{path}: {kind}, not JSON")
            continue
        if not isinstance(body, dict) or required not in body:
            problems.append(f"{path}: JSON without {required!r}")
            continue
        return body
    raise NotSglangError(f"{url} does not answer like an SGLang server ({'; '.join(problems)})")


def fetch_server_facts(url: str, headers: dict[str, str], timeout_s: float = FACTS_LIMIT_S) -> tuple[dict, dict]:
    """(server_info, model_info); raises NotSglangError or UnreachableError. `timeout_s`: each answer's limit."""
    # Every ServerArgs field is in server_info; tp_size has been there in every SGLang version.
    server_info = _json_object(url, SERVER_INFO_PATHS, headers, "tp_size", timeout_s)
    model_info = _json_object(url, MODEL_INFO_PATHS, headers, "model_path", timeout_s)
    return redact_secrets(keep_read_fields(server_info)), redact_secrets(model_info)


def save_server_facts(path: Path, facts: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(redact_secrets(facts), indent=2, sort_keys=True, default=str))
    tmp.replace(path)
    return path
