"""The twin's command line against SGLang's own parser (`ServerArgs.add_cli_args`, as `sglang serve` builds it).

Every SGLang flag the twin accepts must resolve, in SGLang's parser, to the same ServerArgs field, take a
value or not alike, with the same type and default, and parse a sample value to the same result. Flags
the twin refuses must be real SGLang flags (a refusal that names a flag SGLang does not have is stale).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from unittest import mock

import requests
from sglang.srt import runtime_context
from sglang.srt.arg_groups import memory_hook
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang_metrics import DEEPSEEK_V3_CONFIG

from endpoints.sim import server_args as twin_args
from endpoints.sim.cost.profiles import HARDWARE_PROFILES, HardwareName

TWIN_ONLY_PREFIXES = ("--sim-", "--fault-")
# Deliberate differences, each with its reason (printed in the summary).
KNOWN_DEFAULT_DIFFERENCES = {
    "model_path": "SGLang requires --model-path; the twin serves deepseek-ai/DeepSeek-V3 when it is not given",
}


def sglang_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return parser


def resolve(parser: argparse.ArgumentParser, option: str) -> argparse.Action | None:
    """The action SGLang's parser runs for `option` (prefix abbreviations included), None if it refuses it."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            found = parser._parse_optional(option)
        except (SystemExit, argparse.ArgumentError):  # ambiguous prefix
            return None
    return found[0] if found else None


def type_name(action: argparse.Action) -> str:
    return "flag" if action.nargs == 0 else getattr(action.type, "__name__", "str") if action.type else "str"


def sample_value(ours: argparse.Action, theirs: argparse.Action) -> str:
    choices = ours.choices or theirs.choices
    if choices:
        return str(next(iter(choices)))
    return {"int": "8", "float": "0.5", "human_readable_int": "8"}.get(type_name(ours), "x")


def parsed(parser: argparse.ArgumentParser, argv: list[str], dest: str) -> object:
    with contextlib.redirect_stderr(io.StringIO()):
        namespace, _ = parser.parse_known_args(["--model-path", "x", *argv])
    return getattr(namespace, dest)


def twin_sglang_actions() -> list[tuple[str, argparse.Action]]:
    out = []
    for action in twin_args.argument_parser()._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help") and not option.startswith(TWIN_ONLY_PREFIXES):
                out.append((option, action))
    return out


def test_every_flag_the_twin_accepts_is_sglangs_with_the_same_field_type_and_default(record_property):
    sglang, twin = sglang_parser(), twin_args.argument_parser()
    problems, known, unchecked_values = [], [], []
    value_checked = {flags[0].lstrip("-").replace("-", "_") for flags, *_ in twin_args.MODELLED_VALUE_FLAGS}
    ignored = {dest for dest, _ in twin_args.parse_server_args([]).ignored} - value_checked
    checked = twin_sglang_actions()
    for option, ours in checked:
        if option in twin_args.RETIRED_SGLANG_FLAGS:
            continue
        theirs = resolve(sglang, option)
        if theirs is None:
            problems.append(f"{option}: SGLang's parser refuses it")
            continue
        if theirs.dest != ours.dest:
            problems.append(f"{option}: field {ours.dest!r} in the twin, {theirs.dest!r} in SGLang")
        if type_name(ours) != type_name(theirs):
            problems.append(f"{option}: type {type_name(ours)} in the twin, {type_name(theirs)} in SGLang")
        if ours.default != theirs.default:
            if ours.dest in KNOWN_DEFAULT_DIFFERENCES:
                known.append(KNOWN_DEFAULT_DIFFERENCES[ours.dest])
            else:
                problems.append(f"{option}: default {ours.default!r} in the twin, {theirs.default!r} in SGLang")
        if ours.choices and theirs.choices and not set(ours.choices) <= set(theirs.choices):
            problems.append(f"{option}: choices {sorted(set(ours.choices) - set(theirs.choices))} not SGLang's")
        if theirs.choices and not ours.choices:
            if ours.dest in value_checked:
                pass  # parse_server_args refuses every value but the modelled ones
            elif ours.dest in ignored:
                unchecked_values.append(option)
            else:
                problems.append(f"{option}: SGLang takes only {len(list(theirs.choices))} values, the twin any")
        if ours.nargs != 0 and type_name(ours) == type_name(theirs):
            suffixed = ["16k", "32Ki"] if type_name(ours) == "human_readable_int" else []
            for value in [sample_value(ours, theirs), *suffixed]:
                mine, sglangs = parsed(twin, [option, value], ours.dest), parsed(sglang, [option, value], theirs.dest)
                if mine != sglangs:
                    problems.append(f"{option} {value}: parses to {mine!r} in the twin, {sglangs!r} in SGLang")
    record_property("checked", f"{len(checked)} option strings of {len({a.dest for _, a in checked})} fields")
    for note in dict.fromkeys(known):
        record_property("checked", f"known: {note}")
    if unchecked_values:
        record_property("checked", f"known: any value taken by {', '.join(unchecked_values)} (no effect in the twin)")
    assert not problems, "\n".join(problems)


def test_retired_aliases_are_really_gone_from_sglang_and_map_to_the_field_that_replaced_them(record_property):
    sglang = sglang_parser()
    twin = {option: action for option, action in twin_sglang_actions()}
    problems = []
    for option in twin_args.RETIRED_SGLANG_FLAGS:
        if resolve(sglang, option) is not None:
            problems.append(f"{option} is still in SGLang's parser: drop it from RETIRED_SGLANG_FLAGS")
        if option not in twin:
            problems.append(f"{option} is declared retired but the twin does not accept it")
        elif resolve(sglang, twin[option].option_strings[0]) is None:
            problems.append(f"{option}: its replacement {twin[option].option_strings[0]} is not in SGLang's parser")
    record_property("checked", ", ".join(f"{o} (last in {r})" for o, r in twin_args.RETIRED_SGLANG_FLAGS.items()))
    assert not problems, "\n".join(problems)


def test_every_flag_the_twin_refuses_by_name_is_a_real_sglang_flag_and_is_refused(record_property):
    sglang = sglang_parser()
    sglang_options = {o for a in sglang._actions for o in a.option_strings}
    problems = []
    for option in twin_args.UNMODELLED_FLAGS:
        if option not in sglang_options:
            problems.append(f"{option}: refused by name, but not an SGLang flag")
        try:
            twin_args.parse_server_args([option])
            problems.append(f"{option}: the twin accepts it")
        except twin_args.ServerArgsError as refused:
            if option not in str(refused):
                problems.append(f"{option}: refused without naming it ({refused})")
    for flags, _, default, _, _ in twin_args.MODELLED_VALUE_FLAGS:
        theirs = resolve(sglang, flags[0])
        if theirs is None or theirs.default != default:
            problems.append(f"{flags[0]}: the modelled value {default!r} is not SGLang's default")
    for prefix in twin_args.UNMODELLED_FLAG_PREFIXES:
        if not any(o.startswith(prefix) for o in sglang_options):
            problems.append(f"{prefix}*: refused by prefix, but no SGLang flag starts with it")
    record_property(
        "checked",
        f"{len(twin_args.UNMODELLED_FLAGS)} refused by name, {len(twin_args.MODELLED_VALUE_FLAGS)} accepted at "
        f"SGLang's default only, {len(twin_args.UNMODELLED_FLAG_PREFIXES)} refused prefixes",
    )
    assert not problems, "\n".join(problems)


def test_the_twins_server_info_fields_are_server_args_fields(twin_r1, record_property):
    info = requests.get(twin_r1.base_url + "/server_info", timeout=30).json()
    fields = set(ServerArgs.__struct_fields__)  # a msgspec Struct
    twin_fields = {a.dest for _, a in twin_sglang_actions()}
    missing = sorted(d for d in twin_fields if d not in info)
    not_sglang = sorted(d for d in twin_fields if d not in fields)
    record_property("checked", f"{len(twin_fields)} fields in /server_info under ServerArgs' names")
    assert not missing and not not_sglang, f"absent from /server_info: {missing}; not ServerArgs fields: {not_sglang}"


# Shapes whose decode CUDA-graph cap SGLang resolves from the GPU's memory, the TP size and --max-running-requests.
GRAPH_CAP_CASES = (
    ("h100", ["--tp", "8"]),
    ("h100", ["--tp", "2"]),
    ("h200", ["--tp", "8"]),
    ("h200", ["--tp", "2"]),
    ("b200", ["--tp", "8"]),
    ("b200", ["--tp", "2"]),
    ("mi355x", ["--tp", "8"]),
    ("h200", ["--tp", "8", "--max-running-requests", "256"]),
    ("h200", ["--tp", "8", "--max-running-requests", "256", "--cuda-graph-max-bs-decode", "320"]),
    ("b200", ["--tp", "8", "--dp", "8", "--enable-dp-attention", "--max-running-requests", "1024"]),
)


def _sglang_decode_graph_max_bs(hardware: str, flags: list[str]) -> int:
    """SGLang's own resolution (handle_gpu_memory_settings) with the GPU's memory it would read from the device
    (get_device_memory_capacity, in MiB) set to the twin's profile of that GPU: no GPU here."""
    memory_mib = HARDWARE_PROFILES[HardwareName(hardware)].hbm_bytes / 2**20
    with tempfile.TemporaryDirectory() as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(DEEPSEEK_V3_CONFIG))
        with mock.patch.object(memory_hook, "get_device_memory_capacity", return_value=memory_mib):
            args = prepare_server_args(["--model-path", model_dir, "--skip-tokenizer-init", "--device", "cuda", *flags])
            # The context resolves the arguments, reading the memory: inside the patch.
            resolved = runtime_context.create_context(args, role="scheduler").resolved_server_args_dict()
    return resolved["cuda_graph_config"]["decode"]["max_bs"]


def test_the_decode_graph_cap_is_the_one_sglang_resolves(record_property):
    problems = []
    for hardware, flags in GRAPH_CAP_CASES:
        ours = twin_args.parse_server_args(["--sim-hardware", hardware, *flags]).decode_graph_max_bs
        theirs = _sglang_decode_graph_max_bs(hardware, flags)
        if ours != theirs:
            problems.append(f"{hardware} {' '.join(flags)}: twin {ours}, SGLang {theirs}")
    record_property("checked", f"{len(GRAPH_CAP_CASES)} shapes' decode CUDA-graph cap (GPU memory, TP, running cap)")
    assert not problems, "\n".join(problems)
