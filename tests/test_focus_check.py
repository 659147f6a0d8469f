"""How `make focus-check` reads focus-validator's verdict (focus_check/validator_verdict.py): every rule's status from
its JUnit report, and a failed rule failing the export unless it is the alternative of an OR rule that passed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "focus_check"))

from validator_verdict import judge, read_report  # noqa: E402

# The shape of focus-validator 2.2.1's report: a test case per rule, "<rule id> :: <kind>".
REPORT = """<?xml version='1.0' encoding='utf-8'?>
<testsuites name="FOCUS Validations" tests="5" failures="2" errors="1" skipped="1">
  <testsuite name="InvoiceId-C-003-InvoiceId" time="0">
    <testcase name="InvoiceId-C-003-C :: Composite" time="0" />
    <testcase name="InvoiceId-C-004-C :: Nullability" time="0" />
    <testcase name="InvoiceId-C-005-C :: Nullability" time="0">
      <failure name="InvoiceId-C-005-C" message="Nullability check for InvoiceId" type="AssertionError">Failed</failure>
    </testcase>
  </testsuite>
  <testsuite name="ChargeCategory-C-003-ChargeCategory" time="0">
    <testcase name="ChargeCategory-C-003-M :: Validation" time="0">
      <failure name="ChargeCategory-C-003-M" message="Validation" type="AssertionError">Failed</failure>
    </testcase>
    <testcase name="ChargePeriodStart-C-001-M :: Type" time="0"><error message="failed" /></testcase>
    <testcase name="AvailabilityZone-C-000-C :: Composite" time="0"><skipped message="Composite" /></testcase>
  </testsuite>
</testsuites>
"""


def _or_rule(*alternatives: str) -> dict:
    items = [{"CheckFunction": "CheckModelRule", "ModelRuleId": a} for a in alternatives]
    return {"ValidationCriteria": {"Requirement": {"CheckFunction": "OR", "Items": items}}}


MODEL = {"ModelRules": {"InvoiceId-C-003-C": _or_rule("InvoiceId-C-004-C", "InvoiceId-C-005-C")}}


def test_each_rule_s_status_is_read_from_the_report(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    assert read_report(report) == {
        "InvoiceId-C-003-C": "passed", "InvoiceId-C-004-C": "passed", "InvoiceId-C-005-C": "failed",
        "ChargeCategory-C-003-M": "failed", "ChargePeriodStart-C-001-M": "errored",
        "AvailabilityZone-C-000-C": "skipped",
    }  # fmt: skip


def test_a_failed_alternative_is_excused_only_while_its_or_rule_passes():
    statuses = {"InvoiceId-C-003-C": "passed", "InvoiceId-C-004-C": "passed", "InvoiceId-C-005-C": "failed"}
    verdict = judge(statuses, MODEL)
    assert verdict.ok and verdict.excused == ("InvoiceId-C-005-C",)
    both_failed = judge({**statuses, "InvoiceId-C-003-C": "failed", "InvoiceId-C-004-C": "failed"}, MODEL)
    assert both_failed.failing == ("InvoiceId-C-003-C", "InvoiceId-C-004-C", "InvoiceId-C-005-C")
    assert not both_failed.excused


def test_a_failed_or_errored_rule_fails_the_export_and_a_skipped_one_does_not():
    verdict = judge({"ChargeCategory-C-003-M": "failed", "ChargePeriodStart-C-001-M": "errored",
                     "AvailabilityZone-C-000-C": "skipped"}, MODEL)  # fmt: skip
    assert not verdict.ok and verdict.failing == ("ChargeCategory-C-003-M", "ChargePeriodStart-C-001-M")
    assert verdict.summary() == "3 rules: 0 passed, 1 failed, 1 errored, 1 skipped"
