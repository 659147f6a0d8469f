"""A corpus of secret shapes, each a realistic fake secret inside the text it would come in (an error body, a
URL, a header, a config line, a label value), and of ordinary strings that must come out of redaction unchanged.

The values are made up at run time from a fixed seed, so none sits in the repository and every run sees the same
ones. docs/replay.md ("Secrets in what a run keeps") states the miss rate on this corpus; the figures come from
tests/redaction/test_redaction_secret_shapes.py.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass
from urllib.parse import quote

SEED = 39
_ALNUM = string.ascii_letters + string.digits
_PASSWORD_CHARS = _ALNUM + "!@$%^*-_."  # an unquoted value ends at whitespace or one of "',;&?#)]}


@dataclass(frozen=True, slots=True)
class SecretCase:
    shape: str  # what the secret is
    text: str  # the secret inside the text it comes in
    secrets: tuple[str, ...]  # what must not survive redaction


class _Maker:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def alnum(self, n: int) -> str:  # with a digit and both cases, as a generated key has
        return "".join(self.rng.choice(_ALNUM) for _ in range(n - 3)) + "a7Q"

    def upper_alnum(self, n: int) -> str:
        return "".join(self.rng.choice(string.ascii_uppercase + string.digits) for _ in range(n - 1)) + "7"

    def hex(self, n: int) -> str:
        return self.rng.randbytes(n // 2).hex()[: n - 2] + "a1"

    def b64(self, n_bytes: int, urlsafe: bool = False) -> str:
        encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
        return encode(self.rng.randbytes(n_bytes)).decode()

    def password(self, n: int = 16) -> str:
        return "".join(self.rng.choice(_PASSWORD_CHARS) for _ in range(n - 3)) + "x9Z"

    def aws_secret(self, slashes: int = 1) -> str:
        while True:  # 40 characters of base64, `/` and `+` included, as AWS issues them
            value = self.b64(30)
            if value.count("/") >= slashes and all(len(piece) < 16 for piece in value.split("/")[: slashes + 1]):
                return value

    def pem(self, label: str, n_bytes: int = 160) -> tuple[str, str]:
        body = self.b64(n_bytes)
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n", lines[0]

    def jwt(self) -> str:
        header = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').decode().rstrip("=")
        claims = base64.urlsafe_b64encode(b'{"sub":"system:serviceaccount:costbench:replay"}').decode().rstrip("=")
        return f"{header}.{claims}.{self.b64(64, urlsafe=True).rstrip('=')}"


def secret_cases() -> list[SecretCase]:
    m = _Maker(SEED)
    cases: list[SecretCase] = []

    def add(shape: str, text: str, *secrets: str) -> None:
        cases.append(SecretCase(shape, text, secrets))

    s = "sk-" + m.alnum(48)
    add("openai key", f'{{"error": {{"message": "Incorrect API key provided: {s}.", "code": "invalid_api_key"}}}}', s)
    s = "sk-proj-" + m.alnum(40) + "_" + m.alnum(40)
    add("openai project key", f"OPENAI_KEY_FOR_JUDGE {s}", s)
    s = "sk-ant-api03-" + m.b64(70, urlsafe=True).rstrip("=") + "AA"
    add("anthropic key", f"x-api-key: {s}", s)
    s = "hf_" + m.alnum(34)
    add("hugging face token", f"401 Client Error for https://huggingface.co/api/models (token {s})", s)
    s = "ghp_" + m.alnum(36)
    add("github classic token", f"git clone https://x-access-token:{s}@github.com/org/repo.git", s)
    s = "gho_" + m.alnum(36)
    add("github oauth token", f"gh auth status: Logged in with token {s}", s)
    s = "github_pat_" + m.alnum(22) + "_" + m.alnum(59)
    add("github fine-grained token", f"using {s} for the release", s)
    s = "ghs_" + m.alnum(36)
    add("github app token", f"installation token {s} expires in 1h", s)
    s = "glpat-" + m.alnum(20)
    add("gitlab token", f"PRIVATE-TOKEN header {s}", s)
    s = "xoxb-" + str(m.rng.randrange(10**11, 10**12)) + "-" + str(m.rng.randrange(10**12, 10**13)) + "-" + m.alnum(24)
    add("slack bot token", f"slack notifier configured with {s}", s)
    s = "xoxp-" + "-".join(str(m.rng.randrange(10**11, 10**12)) for _ in range(3)) + "-" + m.hex(32)
    add("slack user token", f"slack({s}) ok", s)
    s = f"T{m.upper_alnum(8)}/B{m.upper_alnum(10)}/{m.alnum(24)}"
    add("slack webhook", f"notice POSTed to https://hooks.slack.com/services/{s} (200)", s)
    s = f"{m.rng.randrange(10**17, 10**18)}/{m.b64(51, urlsafe=True).rstrip('=')}"
    add("discord webhook", f"webhook: https://discord.com/api/webhooks/{s}", s)
    s = "sk_live_" + m.alnum(99)
    add("stripe secret key", f"stripe.api_key set from vault: {s}", s)
    s = "rk_test_" + m.alnum(24)
    add("stripe restricted key", f"restricted {s}", s)
    s = "whsec_" + m.alnum(32)
    add("stripe webhook secret", f"endpoint secret is {s}", s)
    s = "npm_" + m.alnum(36)
    add("npm token", f"//registry.npmjs.org/:_authToken {s}", s)
    s = "pypi-AgEIcHlwaS5vcmc" + m.b64(60, urlsafe=True).rstrip("=")
    add("pypi token", f"twine upload -u __token__ {s}", s)
    s = "AKIA" + m.upper_alnum(16)
    add("aws access key id", f"InvalidAccessKeyId: The AWS Access Key Id you provided ({s}) does not exist", s)
    s = m.aws_secret()
    add("aws secret access key, alone", f"credentials row: default {s} us-east-1", s)
    s = m.aws_secret(slashes=3)  # no piece between slashes is long enough to look random on its own
    add("aws secret access key, alone, in short pieces", f"[default] {s}", s)
    s = m.aws_secret()
    add("aws secret access key, named", f"aws_secret_access_key = {s}", s)
    s = quote(m.b64(300), safe="")
    add("aws session token", f"https://b.s3.amazonaws.com/o?X-Amz-Security-Token={s}&X-Amz-Date=20261116T060000Z", s)
    akid, s = "AKIA" + m.upper_alnum(16), m.hex(64)
    add(
        "s3 presigned url",
        f"GET https://costbench-lake.s3.us-east-1.amazonaws.com/runs/part-0.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={akid}%2F20261116%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261116T060000Z"
        f"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={s}",
        akid,
        s,
    )
    akid, s = "AKIA" + m.upper_alnum(16), m.hex(64)
    add(
        "aws sigv4 header",
        f"Authorization: AWS4-HMAC-SHA256 Credential={akid}/20261116/us-east-1/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={s}",
        akid,
        s,
    )
    s = m.hex(512)
    add(
        "gcs v4 signed url",
        "https://storage.googleapis.com/costbench/run.json?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential="
        "replay%40costbench.iam.gserviceaccount.com%2F20261116%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date="
        f"20261116T060000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={s}",
        s,
    )
    s = quote(m.b64(256), safe="")
    add(
        "gcs v2 signed url",
        "https://storage.googleapis.com/costbench/run.json?GoogleAccessId=replay@costbench.iam.gserviceaccount.com"
        f"&Expires=1795000000&Signature={s}",
        s,
    )
    s = quote(m.b64(32), safe="")
    add(
        "azure sas url",
        "https://costbench.blob.core.windows.net/models/ds-v3?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2026-12-01T00:00:00Z&st=2026-11-16T00:00:00Z&spr=https&sig={s}",
        s,
    )
    s = m.b64(64)
    add(
        "azure storage connection string",
        f"DefaultEndpointsProtocol=https;AccountName=costbench;AccountKey={s};EndpointSuffix=core.windows.net",
        s,
    )
    s = m.b64(32)
    add(
        "azure service bus connection string",
        "Endpoint=sb://costbench.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={s}",
        s,
    )
    s = m.alnum(3) + "8Q~" + m.alnum(34).replace("Q", "q")
    add("azure ad client secret", f"client credentials: {s}", s)
    key_pem, key_line = m.pem("PRIVATE KEY")
    key_id = m.hex(40)
    service_account = {
        "type": "service_account",
        "project_id": "costbench",
        "private_key_id": key_id,
        "private_key": key_pem,
        "client_email": "replay@costbench.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    add("gcp service account json", json.dumps(service_account), key_line, key_id)
    pem, line = m.pem("RSA PRIVATE KEY")
    add("rsa private key", f"ssl key:\n{pem}", line)
    pem, line = m.pem("OPENSSH PRIVATE KEY", 240)
    add("openssh private key", pem, line)
    s = "AIza" + m.alnum(35)
    add("google api key", f"https://generativelanguage.googleapis.com/v1/models?key={s}", s)
    s = m.password()
    add("postgres url", f"could not connect: postgresql://costbench:{s}@db.internal:5432/lake", s)
    s = m.password()
    add("mysql url", f"mysql://root:{s}@10.0.0.5:3306/costbench", s)
    s = m.password()
    add("mongodb url", f"mongodb+srv://replay:{s}@cluster0.ab1cd.mongodb.net/?retryWrites=true", s)
    s = m.password()
    add("redis url", f"redis://:{s}@cache:6379/0", s)
    s1, s2 = m.password(10), m.password(10)
    add("url password with @", f"postgres://u:{s1}@{s2}@db:5432/x", s1, s2)
    s = m.password()
    add("amqp url", f"broker amqp://guest:{s}@rabbit:5672//", s)
    s = m.password()
    add("jdbc url", f"jdbc:postgresql://db:5432/lake?user=admin&password={s}&ssl=true", s)
    s = m.password()
    add("ado.net connection string", f"Server=tcp:x.database.windows.net,1433;Database=lake;User ID=u;Password={s};", s)
    s = m.jwt()
    add("jwt", f"token rejected: {s} (expired)", s)
    s = m.alnum(40)
    add("bearer header", f"curl -H 'Authorization: Bearer {s}' http://h/v1/models", s)
    s = base64.b64encode(f"admin:{m.password()}".encode()).decode()
    add("basic auth header", f"Authorization: Basic {s}", s)
    s = m.hex(40)
    add("token auth header", f'{{"headers": {{"Authorization": "Token {s}"}}}}', s)
    s = m.alnum(32)
    add("api key header", f"X-API-Key: {s}", s)
    s = m.password()
    add("password=", f"login failed for user=costbench password={s} at 06:00", s)
    s = m.password()
    add('"password": json', f'{{"user": "replay", "password": "{s}", "port": 5432}}', s)
    s = m.password()
    add("passphrase:", f"ssh-keygen passphrase: {s}", s)
    s = m.password()
    add("passphrase=", f"gpg --batch --passphrase={s} -d lake.gpg", s)
    s = m.password()
    add("mysql -p", f"mysql -u root -p{s} -h db costbench", s)
    s = m.alnum(12).lower() + "zz"
    add("mysqldump -p, a lower-case password", f"mysqldump -uroot -p{s} costbench > dump.sql", s)
    s = m.password()
    add("netrc", f"machine api.example.com login bot password {s}", s)
    s = m.password()
    add("curl -u", f"curl -u admin:{s} https://grafana.internal/api/dashboards", s)
    s = "AC" + m.hex(32)
    add("twilio account sid", f"twilio client for {s}", s)
    s = "SK" + m.hex(32)
    add("twilio api key sid", f"api key {s} created", s)
    s = m.hex(32)
    add("twilio auth token", f"TWILIO_AUTH_TOKEN={s}", s)
    s = "dapi" + m.hex(32)
    add("databricks token", f"databricks configure --host https://adb-1.azuredatabricks.net {s}", s)
    s = "dapi" + m.hex(32) + "-2"
    add("databricks token, suffixed", f"using {s}", s)
    s = "key-" + m.alnum(32)
    add("mailgun key", f"mailgun api:{s}", s)
    s = "SG." + m.b64(16, urlsafe=True).rstrip("=") + "." + m.b64(32, urlsafe=True).rstrip("=")
    add("sendgrid key", f"sendgrid {s}", s)
    s = f"{m.rng.randrange(10**8, 10**9)}:AA{m.b64(27, urlsafe=True)[:33]}"
    add("telegram bot token", f"https://api.telegram.org/bot{s}/sendMessage", s)
    s = "dop_v1_" + m.hex(64)
    add("digitalocean token", f"doctl auth init -t {s}", s)
    s = "shpat_" + m.hex(32)
    add("shopify token", f"X-Shopify-Access-Token: {s}", s)
    s = "hvs." + m.alnum(24)
    add("vault token", f"VAULT_TOKEN {s}", s)
    s = "NRAK-" + m.upper_alnum(27)
    add("new relic key", f"newrelic {s}", s)
    s = "AGE-SECRET-KEY-1" + m.upper_alnum(58)
    add("age secret key", f"# created: 2026-11-16\n{s}\n", s)
    s = m.password()
    add("PGPASSWORD", f"PGPASSWORD={s} psql -h db lake", s)
    s = m.b64(32, urlsafe=True).rstrip("=")
    add("cookie header", f"Cookie: session={s}; theme=dark", s)
    s = m.b64(32, urlsafe=True).rstrip("=")
    add("set-cookie header", f"Set-Cookie: sid={s}; Path=/; HttpOnly", s)
    s = m.jwt()
    add("kubernetes token", f"token: {s}", s)
    s = base64.b64encode(f"bot:{'ghp_' + m.alnum(36)}".encode()).decode()
    add("docker config auth", json.dumps({"auths": {"ghcr.io": {"auth": s}}}), s)
    s = m.alnum(32)
    add("api_key query parameter", f"GET /v1/models?api_key={s}&limit=5 -> 401", s)
    s = m.hex(32)
    add("sentry dsn", f"SENTRY_DSN=https://{s}@o123456.ingest.sentry.io/789", s)
    s = m.hex(32)
    add("datadog api key", f"DD_API_KEY={s}", s)
    s = m.b64(32)
    add("random base64 key, no name", f'{{"value": "{s}"}}', s)
    s = m.hex(32)
    add("random hex key, no name", f"note: {s}", s)
    return cases


def ordinary_strings() -> list[str]:
    """Facts costbench stores that look nothing like a secret to a reader, and must come out unchanged."""
    rng = random.Random(SEED)
    return [
        "deepseek-ai/DeepSeek-V3-0324",
        "meta-llama/Llama-3.1-70B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
        "RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        "Qwen2VLForConditionalGeneration",
        "DeepseekV3ForCausalLMWithMTPLayerAndMore",  # 40 characters, like a bare AWS secret
        "sglang:prompt_tokens_total",
        "sglang:e2e_request_latency_seconds_bucket",
        "smg_worker_requests_active",
        "DCGM_FI_PROF_SM_ACTIVE",
        'model_name="deepseek-ai/DeepSeek-V3",engine_type="unified",tp_rank="0"',
        "/root/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-V3/snapshots/"
        "86518964eaef84e3fdd98e9861759a1384f9c29d/config.json",
        "runs/week=2026-11-16/scenario=chat-v3/20261116-chat-v3-1a2b3c4d/requests.parquet",
        "/data/lake/requests/week=2026-11-16/scenario=chat/part-0.parquet",
        "3f2a9c1e7b4d",  # a config fingerprint (12 hex digits)
        "a3f2b9c1e7d40516",  # a workload hash (16)
        "9e107d9d372bb6826bd8",  # a trace's identity (20)
        "capacity_cache/slo-5d41402abc4b2a76b9719d91.json",  # a capacity sweep's key (24)
        str(uuid.UUID(int=rng.getrandbits(128), version=4)),  # a Dagster run id
        "chatcmpl-9f8e7d6c5b4a",
        "req-000123",
        "r42",
        "http://127.0.0.1:30000/metrics",
        "http://10.0.0.7:30001",
        "https://huggingface.co/deepseek-ai/DeepSeek-V3",
        "0.5.4.post2.dev123+g1a2b3c4d",
        "fp8_e4m3",
        "--tp-size 8 --enable-dp-attention --chunked-prefill-size 8192",
        "HTTP 503: Service Unavailable",
        "ClientConnectorError: Cannot connect to host 127.0.0.1:30000 ssl:default [Connect call failed "
        "('127.0.0.1', 30000)]",
        'HTTP 400: {"object": "error", "message": "The input (9000 tokens) is longer than the model\'s context '
        'length (8192 tokens).", "type": "BadRequestError", "param": null, "code": 400}',
        "the replay was stopped before this request finished",
        "Basic usage: name the key's variable in api_key_env",
        "the password was rejected; token usage 0.75",
        "max_total_num_tokens=400000",
        "gcc -O2 -pthread -pedantic -o bench bench.c",
        "ssh -p2222 gpu-node-17.cluster.local",
        "docker run -p8080:80 -u 1000:1000 lmsysorg/sglang:v0.5.4",
        "sk-learn-compatible-estimator",
        "GPU-5a3c2b1d-8e7f-4a6b-9c0d-1e2f3a4b5c6d",
        "NVIDIA H100 80GB HBM3",
        "2026-11-16T06:00:00Z",
    ]
