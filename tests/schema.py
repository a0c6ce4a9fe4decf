"""report.json's schema check, for tests only: ``jsonschema`` is a test dependency, not a runtime
one (see BUILD.md, "Dependencies and why")."""
from __future__ import annotations

import json

import jsonschema

from compare.output.report import SCHEMA_PATH


def validate(report: dict) -> None:
    """Raise ``jsonschema.ValidationError`` if ``report`` does not match report.schema.json."""
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text()))
