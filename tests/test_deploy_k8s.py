"""deploy/k8s/ as Dagster and dagster-k8s read it.

The instance (dagster.yaml) loads with its K8sRunLauncher, which builds the run pod; the step
executor's run config validates against k8s_job_executor on the weekly job's own assets and builds
the step pods; the Helm values render (as the chart's templates do) an instance that loads the same
way; the endpoint manifests are Kubernetes objects that serve the endpoints attached to them. Pods are
built with dagster-k8s's own functions, whose Kubernetes models refuse unknown keys, so a misspelled
key anywhere in deploy/k8s fails here (the last tests show each check refusing one).
"""

from __future__ import annotations

import copy
import importlib
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import kubernetes.client as k8s
import pytest
import yaml
from dagster_k8s import K8sRunLauncher, construct_dagster_k8s_job, k8s_job_executor
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import UserDefinedDagsterK8sConfig
from dagster_k8s.models import k8s_model_from_dict, k8s_snake_case_dict
from dagster_postgres import DagsterPostgresStorage

from endpoints.sim.server_args import parse_server_args
from endpoints.spec import EndpointMode, load_endpoint_specs
from pipelines.definitions import build_definitions
from workloads.scenarios import load_scenarios

# build_definitions() declares partitioned asset checks, a Dagster preview feature used knowingly.
pytestmark = pytest.mark.filterwarnings("ignore:Specifying a partitions_def on an AssetCheckSpec")

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "deploy" / "k8s"
IMAGE = "registry.example.internal/costbench:latest"
PG_ENV = {"DAGSTER_PG_HOST": "postgres.costbench", "DAGSTER_PG_USER": "dagster", "DAGSTER_PG_PASSWORD": "unused"}
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: offline, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: offline, user: {token: unused}}]
contexts: [{name: offline, context: {cluster: offline, user: offline}}]
current-context: offline
"""

# Keys the Dagster Helm chart (1.13) accepts in the blocks values.yaml sets, from the chart's values
# schema (helm/dagster/schema in the dagster repository; the Python packages do not ship it). Blocks
# of Kubernetes types (env, volumes, containerConfig, ...) are checked against the Kubernetes models.
HELM_KEYS: dict[tuple[str, ...], set[str]] = {
    (): {
        "dagsterWebserver", "dagster-user-deployments", "postgresql", "generatePostgresqlPasswordSecret",
        "generateCeleryConfigSecret", "rabbitmq", "redis", "flower", "ingress", "imagePullSecrets",
        "computeLogManager", "scheduler", "runLauncher", "pythonLogs", "dagsterDaemon", "busybox", "migrate",
        "telemetry", "serviceAccount", "global", "retention", "concurrency", "additionalInstanceConfig",
    },
    ("dagster-user-deployments",): {"enabled", "enableSubchart", "imagePullSecrets", "deployments"},
    ("dagster-user-deployments", "deployments", "*"): {
        "name", "image", "dagsterApiGrpcArgs", "codeServerArgs", "includeConfigInLaunchedRuns", "port", "env",
        "envConfigMaps", "envSecrets", "annotations", "nodeSelector", "affinity", "tolerations",
        "podSecurityContext", "securityContext", "resources", "livenessProbe", "readinessProbe", "startupProbe",
        "labels", "volumeMounts", "volumes", "schedulerName",
    },
    ("dagster-user-deployments", "deployments", "*", "image"): {"repository", "tag", "pullPolicy"},
    ("runLauncher",): {"type", "config"},
    ("runLauncher", "config"): {"celeryK8sRunLauncher", "k8sRunLauncher", "customRunLauncher"},
    ("runLauncher", "config", "k8sRunLauncher"): {
        "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile", "envConfigMaps",
        "envSecrets", "envVars", "volumeMounts", "volumes", "labels", "failPodOnRunFailure", "resources",
        "schedulerName", "securityContext", "runK8sConfig",
    },
    ("runLauncher", "config", "k8sRunLauncher", "runK8sConfig"): {
        "containerConfig", "podSpecConfig", "podTemplateSpecMetadata", "jobSpecConfig", "jobMetadata",
    },
    ("dagsterDaemon",): {
        "enabled", "image", "runCoordinator", "heartbeatTolerance", "env", "envConfigMaps", "envSecrets",
        "deploymentLabels", "labels", "nodeSelector", "affinity", "tolerations", "podSecurityContext",
        "securityContext", "resources", "livenessProbe", "readinessProbe", "startupProbe", "annotations",
        "runMonitoring", "runRetries", "sensors", "schedules", "schedulerName", "volumeMounts", "volumes",
    },
    ("dagsterDaemon", "runCoordinator"): {"enabled", "type", "config"},
    ("dagsterDaemon", "sensors"): {"useThreads", "numWorkers", "numSubmitWorkers"},
    ("concurrency",): {"enabled", "pools", "runs"},
    ("concurrency", "pools"): {"defaultLimit", "granularity", "opGranularityRunBuffer"},
    ("concurrency", "runs"): {"maxConcurrentRuns", "tagConcurrencyLimits"},
    ("concurrency", "runs", "tagConcurrencyLimits", "*"): {"key", "value", "limit"},
    ("postgresql",): {
        "postgresqlScheme", "image", "enabled", "postgresqlHost", "postgresqlUsername", "postgresqlPassword",
        "postgresqlDatabase", "postgresqlParams", "service",
    },
}  # fmt: skip


def _load(name: str):
    return yaml.safe_load((K8S / name).read_text())


def _k8s(model: type, value: dict):
    """A Kubernetes API object from YAML keys (camelCase or snake_case), as dagster-k8s parses them:
    an unknown key anywhere inside raises."""
    return k8s_model_from_dict(model, k8s_snake_case_dict(model, value))


@pytest.fixture()
def offline(tmp_path, monkeypatch):
    """Loads an instance config the way Dagster does (DAGSTER_HOME/dagster.yaml), changed only where a
    unit test has no cluster: SQLite for Postgres (whose block test_postgres_storage checks against
    dagster-postgres's schema) and a kubeconfig file for the in-cluster service account."""
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("COSTBENCH_FAILURE_WEBHOOK_URL", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)

    @contextmanager
    def instance(config: dict):
        config = copy.deepcopy(config)
        config["storage"] = {"sqlite": {"base_dir": str(tmp_path / "storage")}}
        launcher = config["run_launcher"]["config"]
        launcher.update(load_incluster_config=False, kubeconfig_file=str(kubeconfig))
        home = tmp_path / "dagster_home"
        home.mkdir(exist_ok=True)
        (home / "dagster.yaml").write_text(yaml.safe_dump(config))
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        with dg.DagsterInstance.get() as loaded:
            yield loaded

    return instance


def _run_container_context(launcher: K8sRunLauncher) -> K8sContainerContext:
    return launcher.get_container_context_for_run(dg.DagsterRun(job_name="weekly_benchmark", run_id="0" * 36))


def _pod(context: K8sContainerContext, launcher: K8sRunLauncher, component: str) -> k8s.V1PodSpec:
    """The pod dagster-k8s would create (K8sRunLauncher.launch_run, K8sStepHandler.launch_step)."""
    job = construct_dagster_k8s_job(
        job_config=context.get_k8s_job_config(job_image=IMAGE, run_launcher=launcher),
        args=["dagster", "api", "execute_run"],
        job_name=f"dagster-{component}",
        pod_name=f"dagster-{component}",
        component=component,
        user_defined_k8s_config=context.run_k8s_config,
    )
    return job.spec.template.spec


def check_instance(config: dict, offline) -> dict:
    """Loads the instance and builds its run pod; returns what the tests look at."""
    with offline(config) as instance:
        launcher = instance.run_launcher
        assert isinstance(launcher, K8sRunLauncher)
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        limits = instance.get_concurrency_config()
        pod = _pod(_run_container_context(launcher), launcher, "run_worker")
        return {"launcher": launcher, "limits": limits, "pod": pod}


def _k8s_job(assets_defs) -> dg.JobDefinition:
    # The week x scenario assets, as the weekly job selects them (the week-only twin_calibration has its own job).
    selection = dg.AssetSelection.all() - dg.AssetSelection.assets("twin_calibration")
    job = dg.define_asset_job("weekly_benchmark_k8s", selection=selection, executor_def=k8s_job_executor)
    return dg.Definitions(assets=assets_defs.assets, jobs=[job], resources=assets_defs.resources).resolve_job_def(
        "weekly_benchmark_k8s"
    )


def check_executor_run_config(run_config: dict, launcher: K8sRunLauncher) -> dict[str, k8s.V1PodSpec]:
    """Validates the run config against k8s_job_executor on the weekly job's assets; builds each op's step
    pod the way K8sStepHandler merges run launcher, executor and per-op config."""
    job = _k8s_job(build_definitions())
    execution = dg.validate_run_config(job, run_config)["execution"][k8s_job_executor.name]  # "config" resolved
    op_names = {op.name for op in job.graph.iterate_op_defs()}
    unknown = set(execution["per_step_k8s_config"]) - op_names
    assert not unknown, f"per_step_k8s_config names no op of the job: {unknown}"
    executor_context = K8sContainerContext(
        namespace=execution.get("job_namespace"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(execution.get("step_k8s_config", {})),
    )
    context = K8sContainerContext.create_for_run(
        dg.DagsterRun(job_name=job.name, run_id="0" * 36), launcher, include_run_tags=False
    ).merge(executor_context)
    pods = {}
    for op in sorted(op_names):
        per_op = UserDefinedDagsterK8sConfig.from_dict(execution["per_step_k8s_config"].get(op, {}))
        pods[op] = _pod(context.merge(K8sContainerContext(run_k8s_config=per_op)), launcher, "step_worker")
    return pods


def _nodes(tree, path: tuple[str, ...]):
    """Every node at `path` ("*": each item of a list)."""
    if not path:
        yield tree
        return
    head, rest = path[0], path[1:]
    if head == "*":
        for item in tree if isinstance(tree, list) else []:
            yield from _nodes(item, rest)
    elif isinstance(tree, dict) and head in tree:
        yield from _nodes(tree[head], rest)


def render_helm_instance(values: dict) -> dict:
    """The instance pieces the chart renders from the values costbench sets (templates/helpers/instance:
    _run-launcher.tpl, _run-coordinator.tpl, _concurrency.tpl), after checking every key of those blocks."""
    for path, allowed in HELM_KEYS.items():
        for node in _nodes(values, path):
            unknown = set(node) - allowed
            assert not unknown, f"values.yaml {'.'.join(path) or '(top)'}: the chart has no {sorted(unknown)}"
    for deployment in values["dagster-user-deployments"]["deployments"]:
        for env in deployment.get("env", []):
            _k8s(k8s.V1EnvVar, env)
        for secret in deployment.get("envSecrets", []):
            _k8s(k8s.V1SecretEnvSource, secret)
        for volume in deployment.get("volumes", []):
            _k8s(k8s.V1Volume, volume)
        for mount in deployment.get("volumeMounts", []):
            _k8s(k8s.V1VolumeMount, mount)
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s_values = launcher["config"]["k8sRunLauncher"]
    run_k8s_config = k8s_values.get("runK8sConfig", {})
    config = {
        "load_incluster_config": k8s_values.get("loadInclusterConfig", True),
        "job_namespace": k8s_values["jobNamespace"],
        "image_pull_policy": k8s_values.get("imagePullPolicy", "Always"),
        "service_account_name": "dagster",
        "dagster_home": "/opt/dagster/dagster_home",
        "instance_config_map": "dagster-instance",
        "postgres_password_secret": "dagster-postgresql-secret",
        "env_secrets": [s["name"] for s in k8s_values.get("envSecrets", [])],
        "env_vars": k8s_values.get("envVars", []),
        "volume_mounts": k8s_values.get("volumeMounts", []),
        "volumes": k8s_values.get("volumes", []),
        "fail_pod_on_run_failure": bool(k8s_values.get("failPodOnRunFailure")),
        "run_k8s_config": {
            snake: run_k8s_config[camel]
            for camel, snake in (("containerConfig", "container_config"), ("podSpecConfig", "pod_spec_config"))
            if camel in run_k8s_config
        },
    }
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] and coordinator["type"] == "QueuedRunCoordinator"
    sensors = values["dagsterDaemon"].get("sensors", {})  # _instance's sensors block: rendered when useThreads
    sensors_block = {"use_threads": True, "num_workers": sensors["numWorkers"]} if sensors.get("useThreads") else None
    concurrency = values["concurrency"]
    assert concurrency["enabled"]
    pools, runs = concurrency.get("pools", {}), concurrency.get("runs", {})
    return {
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": config},
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
        **({"sensors": sensors_block} if sensors_block else {}),
        "concurrency": {
            "pools": {"default_limit": pools["defaultLimit"]},
            "runs": {
                "max_concurrent_runs": runs["maxConcurrentRuns"],
                "tag_concurrency_limits": runs["tagConcurrencyLimits"],
            },
        },
    }


def check_manifests(docs: list[dict]) -> dict[str, tuple[k8s.V1Deployment, k8s.V1Service]]:
    """Deployments and Services as Kubernetes objects; each Service selects its Deployment's pods and
    targets the port the twin listens on. Returns them by the endpoint they serve."""
    deployments = {d["metadata"]["name"]: _k8s(k8s.V1Deployment, d) for d in docs if d["kind"] == "Deployment"}
    services = {d["metadata"]["name"]: _k8s(k8s.V1Service, d) for d in docs if d["kind"] == "Service"}
    assert set(deployments) == set(services)
    served = {}
    for name, deployment in deployments.items():
        service = services[name]
        pod = deployment.spec.template
        assert deployment.spec.selector.match_labels.items() <= pod.metadata.labels.items()
        assert service.spec.selector.items() <= pod.metadata.labels.items()
        [container] = pod.spec.containers
        [port] = container.ports
        [service_port] = service.spec.ports
        assert service_port.target_port in (port.name, port.container_port)
        args = parse_server_args(container.args)
        assert (args.host, args.port) == ("0.0.0.0", port.container_port)
        served[pod.metadata.labels["costbench/endpoint"]] = (deployment, service)
    return served


def test_instance_loads_with_its_run_launcher_run_pod_and_run_limits(offline):
    loaded = check_instance(_load("dagster.yaml"), offline)
    assert loaded["launcher"].job_namespace == "costbench"
    # The same run limits as the local instance (one replay per endpoint, one DuckDB writer).
    local = yaml.safe_load((REPO / "dagster.yaml").read_text())["concurrency"]
    limits = loaded["limits"]
    assert list(limits.run_queue_config.tag_concurrency_limits) == local["runs"]["tag_concurrency_limits"]
    assert limits.pool_config.default_pool_limit == local["pools"]["default_limit"] == 1
    [container] = loaded["pod"].containers
    env = {e.name: e for e in container.env}
    assert env["COSTBENCH_WAREHOUSE"].value == "/mnt/costbench/warehouse"
    assert env["DAGSTER_PG_HOST"].value == PG_ENV["DAGSTER_PG_HOST"]  # passed through: run pods load this instance
    assert env["POD_IP"].value_from.field_ref.field_path == "status.podIP"
    assert env["DAGSTER_PG_PASSWORD"].value_from.secret_key_ref.name == "dagster-postgresql-secret"
    assert container.resources.requests == {"cpu": "4", "memory": "8Gi"}
    assert [m.mount_path for m in container.volume_mounts] == ["/mnt/costbench"]
    [volume] = loaded["pod"].volumes
    assert volume.persistent_volume_claim.claim_name == "costbench-warehouse"
    # PID 1 is the pod's pause process, which reaps a stopped server whose starting step has exited.
    assert loaded["pod"].share_process_namespace is True


def _check_schema(schema, value):
    """Validates a value against a Dagster config schema with Dagster's public run config validation."""

    @dg.op(name="block", config_schema=schema)
    def block():
        pass

    @dg.job(name="holds_block")
    def holds_block():
        block()

    return dg.validate_run_config(holds_block, {"ops": {"block": {"config": value}}})["ops"]["block"]["config"]


def test_postgres_storage_matches_dagster_postgres_schema(monkeypatch):
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    storage = _load("dagster.yaml")["storage"]
    assert list(storage) == ["postgres"]  # dagster's key for dagster_postgres.DagsterPostgresStorage
    processed = _check_schema(DagsterPostgresStorage.config_type(), storage["postgres"])
    assert processed["postgres_db"]["hostname"] == PG_ENV["DAGSTER_PG_HOST"]


def test_step_executor_run_config_fits_k8s_job_executor_and_builds_the_step_pods(offline):
    with offline(_load("dagster.yaml")) as instance:
        pods = check_executor_run_config(_load("run_config_k8s_executor.yaml"), instance.run_launcher)
    shard, other = pods["replay_shard"], pods["start_endpoint"]
    assert shard.containers[0].resources.limits == {"cpu": "1", "memory": "2Gi"}
    assert shard.node_selector == {"costbench/role": "loadgen"}
    assert other.containers[0].resources.limits == {"cpu": "2", "memory": "4Gi"}
    # The run launcher's settings reach every step pod (the lake volume, secrets by name).
    assert shard.volumes[0].persistent_volume_claim.claim_name == "costbench-warehouse"


def test_helm_values_render_the_instance_of_dagster_yaml(offline):
    rendered = render_helm_instance(_load("values.yaml"))
    shipped = _load("dagster.yaml")
    assert rendered["concurrency"] == shipped["concurrency"]
    # Sensors in threads of their own in all three instances (a slow notice webhook holds no other sensor).
    local = yaml.safe_load((REPO / "dagster.yaml").read_text())
    assert rendered["sensors"] == shipped["sensors"] == local["sensors"] == {"use_threads": True, "num_workers": 4}
    loaded = check_instance(rendered, offline)
    assert loaded["launcher"].job_namespace == shipped["run_launcher"]["config"]["job_namespace"]
    # The chart's run pod and dagster.yaml's: same secrets, lake volume, resources and POD_IP (the chart
    # renders Postgres's address itself, so DAGSTER_PG_* need no pass-through there).
    helm_container, own_container = loaded["pod"].containers[0], check_instance(shipped, offline)["pod"].containers[0]
    assert helm_container.env_from == own_container.env_from
    assert helm_container.volume_mounts == own_container.volume_mounts
    assert helm_container.resources == own_container.resources
    assert loaded["pod"].share_process_namespace is True
    assert {e.name for e in own_container.env} - {e.name for e in helm_container.env} == {
        "DAGSTER_PG_HOST",
        "DAGSTER_PG_USER",
    }
    [deployment] = _load("values.yaml")["dagster-user-deployments"]["deployments"]
    grpc = dict(zip(deployment["dagsterApiGrpcArgs"][::2], deployment["dagsterApiGrpcArgs"][1::2]))
    assert isinstance(getattr(importlib.import_module(grpc["--module-name"]), grpc["--attribute"]), dg.Definitions)


def test_endpoint_twins_serve_the_attached_endpoints_with_the_sim_endpoints_flags():
    served = check_manifests(list(yaml.safe_load_all((K8S / "endpoint_twin.yaml").read_text())))
    attached = load_endpoint_specs(K8S / "endpoints.yaml")
    sim = load_endpoint_specs(REPO / "workloads" / "endpoints.yaml")
    used = {s.endpoint for s in load_scenarios(REPO / "workloads" / "scenarios.yaml", REPO).values()}
    assert used <= set(attached) == set(served)  # every scenario finds its endpoint under this executor
    for name, spec in attached.items():
        deployment, service = served[name]
        assert spec.mode is EndpointMode.ATTACH
        namespace = service.metadata.namespace
        assert spec.url == f"http://{service.metadata.name}.{namespace}.svc.cluster.local:{service.spec.ports[0].port}"
        args = deployment.spec.template.spec.containers[0].args
        model = args[args.index("--model-path") + 1]
        own_flags = args[args.index("--enable-cache-report") + 1 :]
        assert (
            (model, tuple(own_flags)) == (spec.model, sim[name].server_args) == (sim[name].model, sim[name].server_args)
        )
        assert {"--enable-metrics", "--enable-cache-report"} <= set(args)


def _quoted(key: str) -> str:
    """An error message naming exactly this key (dagster quotes it, the Kubernetes models print a set)."""
    return f"[\"']{key}[\"']"


def _rename(tree, path: tuple, new_key: str):
    tree = copy.deepcopy(tree)
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[new_key] = node.pop(path[-1])
    return tree


@pytest.mark.parametrize(
    "path, typo",
    [
        (("run_launcher", "config", "job_namespace"), "job_namepsace"),
        (("run_launcher", "config", "volumes", 0, "persistentVolumeClaim"), "persistentVolumeClam"),
        (("run_launcher", "config", "run_k8s_config", "container_config", "resources"), "resource"),
        (("concurrency", "runs", "tag_concurrency_limits"), "tag_concurency_limits"),
    ],
)
def test_a_misspelled_key_in_dagster_yaml_fails(offline, path, typo):
    with pytest.raises(Exception, match=_quoted(typo)):
        check_instance(_rename(_load("dagster.yaml"), path, typo), offline)


def test_a_misspelled_key_in_the_postgres_block_fails(monkeypatch):
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    storage = _rename(_load("dagster.yaml")["storage"], ("postgres", "postgres_db", "db_name"), "dbname")
    with pytest.raises(dg.DagsterInvalidConfigError, match=_quoted("dbname")):
        _check_schema(DagsterPostgresStorage.config_type(), storage["postgres"])


@pytest.mark.parametrize(
    "path, typo",
    [
        (("execution", "config", "step_k8s_config"), "step_k8s_configs"),
        (("execution", "config", "per_step_k8s_config", "replay_shard"), "replay_shards"),
        (
            ("execution", "config", "per_step_k8s_config", "replay_shard", "pod_spec_config", "node_selector"),
            "node_selecter",
        ),
        (("execution", "config", "step_k8s_config", "container_config", "resources", "requests"), "request"),
    ],
)
def test_a_misspelled_key_in_the_step_executor_run_config_fails(offline, path, typo):
    with offline(_load("dagster.yaml")) as instance:
        with pytest.raises(Exception, match=_quoted(typo)):
            check_executor_run_config(_rename(_load("run_config_k8s_executor.yaml"), path, typo), instance.run_launcher)


@pytest.mark.parametrize(
    "path, typo",
    [
        (("runLauncher", "config", "k8sRunLauncher", "jobNamespace"), "jobNamspace"),
        (("dagster-user-deployments", "deployments", 0, "dagsterApiGrpcArgs"), "dagsterApiGrpcArg"),
        (("dagster-user-deployments", "deployments", 0, "volumeMounts", 0, "mountPath"), "mountpath"),
        (("concurrency", "runs", "tagConcurrencyLimits"), "tagConcurrencyLimit"),
        (
            ("runLauncher", "config", "k8sRunLauncher", "runK8sConfig", "containerConfig", "env", 0, "valueFrom"),
            "valuefrom",
        ),
    ],
)
def test_a_misspelled_key_in_the_helm_values_fails(offline, path, typo):
    with pytest.raises(Exception, match=_quoted(typo)):
        check_instance(render_helm_instance(_rename(_load("values.yaml"), path, typo)), offline)


@pytest.mark.parametrize(
    "doc, path, typo",
    [
        (0, ("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"), "containerPorts"),
        (0, ("spec", "template", "spec", "containers", 0, "readinessProbe"), "readinesProbe"),
        (1, ("spec", "selector"), "selectors"),
    ],
)
def test_a_misspelled_key_in_the_endpoint_manifests_fails(doc, path, typo):
    docs = list(yaml.safe_load_all((K8S / "endpoint_twin.yaml").read_text()))
    docs[doc] = _rename(docs[doc], path, typo)
    with pytest.raises(Exception, match=_quoted(typo)):
        check_manifests(docs)


def test_helm_chart_and_dagster_yaml_name_the_same_postgres_driver():
    # Under SQLAlchemy 2.1 a bare postgresql:// loads psycopg 3, which is not installed: both the instance the
    # chart renders and dagster.yaml's must name psycopg2, or the instance fails to open its storage.
    shipped = _load("dagster.yaml")["storage"]["postgres"]["postgres_db"]["scheme"]
    assert shipped == "postgresql+psycopg2"
    assert _load("values.yaml")["postgresql"]["postgresqlScheme"] == shipped
