"""What the FinOps Foundation's focus-validator says of a FOCUS file, run from its own environment (build/focus-venv,
focus_check/requirements.txt) and read from its JUnit report: one test case per rule of its FOCUS 1.2 model, each
passed, failed, errored (it could not check) or skipped (a feature the file does not claim, a rule it cannot yet
generate, a MAY).

A failed or errored rule fails the file, but for one kind: an alternative of an OR rule that passed. The model writes
"InvoiceId MUST be null when the charge has no invoice" and "MUST NOT be null when it has one" as two rules under an
OR (InvoiceId-C-003-C), and the validator reports the alternative that does not hold as failed although the OR holds.

Two quirks of focus-validator 2.2.1 are worked around here: it reads its ISO 4217 currency list from
focus_validator/rules/currency_codes.csv relative to the working folder, so it runs in its site-packages; and its
logging configuration writes a DEBUG log file into that folder, so validator_logging.yaml (beside this file) sends
warnings to stderr instead."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

FOCUS_VERSION = "1.2"
LOGGING_CONFIG = Path(__file__).with_name("validator_logging.yaml")


@dataclass(frozen=True, slots=True)
class Validator:
    """focus-validator as installed in `venv`: its command, its package folder and the FOCUS model it validates by."""

    venv: Path
    site_packages: Path
    version: str
    model_path: Path

    @staticmethod
    def of_venv(venv: Path) -> Validator:
        venv = venv.absolute()  # it runs in its site-packages
        python = venv / "bin" / "python"
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        site_packages = Path(site)
        [dist_info] = site_packages.glob("focus_validator-*.dist-info")
        version = dist_info.name.removeprefix("focus_validator-").removesuffix(".dist-info")
        [model_path] = (site_packages / "focus_validator" / "rules").glob(f"model-{FOCUS_VERSION}*.json")
        return Validator(venv, site_packages, version, model_path)

    def model(self) -> dict:
        return json.loads(self.model_path.read_text(encoding="utf-8"))

    def run(self, data_file: Path, report: Path, criteria: tuple[str, ...]) -> None:
        """Validates `data_file` against FOCUS 1.2 with the model bundled in the package (--block-download: nothing
        is fetched), the provider features `criteria` (the model's applicability criteria) claimed, and writes the
        JUnit report to `report`."""
        env = dict(os.environ, LOGGING_CONFIG=str(LOGGING_CONFIG))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # its first run compiles the venv's modules for the next ones
        subprocess.run(
            [
                str(self.venv / "bin" / "focus-validator"),
                "--data-file", str(data_file.resolve()),
                "--validate-version", FOCUS_VERSION,
                "--block-download",
                "--applicability-criteria", ",".join(criteria),
                "--output-type", "unittest",
                "--output-destination", str(report.resolve()),
            ],
            check=True, cwd=self.site_packages, env=env, stdout=subprocess.DEVNULL,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Verdict:
    """Every rule's outcome: the validator's counts, and which rules fail the file."""

    statuses: dict[str, str]  # rule id -> passed | failed | errored | skipped
    failing: tuple[str, ...]  # failed or errored, less the excused
    excused: tuple[str, ...]  # failed alternatives of an OR rule that passed

    @property
    def ok(self) -> bool:
        return not self.failing

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)

    def summary(self) -> str:
        line = (
            f"{len(self.statuses)} rules: {self.count('passed')} passed, {self.count('failed')} failed, "
            f"{self.count('errored')} errored, {self.count('skipped')} skipped"
        )
        if self.excused:
            line += f" ({', '.join(self.excused)}: the failed alternative of an OR rule that passed)"
        return line


def read_report(report: Path) -> dict[str, str]:
    """Rule id -> status, from the validator's JUnit report (a test case per rule, named "<rule id> :: <kind>")."""
    statuses = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        rule_id = case.attrib["name"].split(" :: ")[0]
        if case.find("failure") is not None:
            statuses[rule_id] = "failed"
        elif case.find("error") is not None:
            statuses[rule_id] = "errored"
        elif case.find("skipped") is not None:
            statuses[rule_id] = "skipped"
        else:
            statuses[rule_id] = "passed"
    return statuses


def judge(statuses: dict[str, str], model: dict) -> Verdict:
    """The verdict on `statuses`, excusing a failed alternative of an OR rule of `model` that passed."""
    or_parents: dict[str, list[str]] = {}
    for rule_id, rule in model["ModelRules"].items():
        requirement = rule.get("ValidationCriteria", {}).get("Requirement", {})
        if requirement.get("CheckFunction") == "OR":
            for item in requirement.get("Items", []):
                if item.get("CheckFunction") == "CheckModelRule":
                    or_parents.setdefault(item["ModelRuleId"], []).append(rule_id)
    bad = sorted(r for r, s in statuses.items() if s in ("failed", "errored"))
    excused = tuple(r for r in bad if any(statuses.get(p) == "passed" for p in or_parents.get(r, ())))
    return Verdict(statuses, tuple(r for r in bad if r not in excused), excused)


def must_satisfy(model: dict, rule_id: str) -> str:
    """What the rule asks, in the spec's words."""
    return model["ModelRules"].get(rule_id, {}).get("ValidationCriteria", {}).get("MustSatisfy", "")
