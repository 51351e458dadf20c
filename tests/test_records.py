"""records.py and the typed records built on it: fields checked by type, defaults for keys a
file may lack, unknown keys ignored, one error naming the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from transformer_cli.records import RecordError, from_json, to_json


@dataclass(frozen=True)
class Inner:
    mean: float
    max: int


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: str
    sizes: dict[str, Inner]
    shards: list[int]
    note: str | None = None
    extra: list[str] = field(default_factory=list)


RAW = {"name": "x", "sizes": {"train": {"mean": 2, "max": 7}}, "shards": [3, 4], "unknown": 1}


def test_a_record_reads_typed_and_round_trips():
    record = from_json(Outer, RAW, "test.json")
    assert record == Outer(name="x", sizes={"train": Inner(2.0, 7)}, shards=[3, 4])
    assert isinstance(record.sizes["train"].mean, float)  # an int where a float is expected
    assert to_json(record) == {
        "name": "x",
        "sizes": {"train": {"mean": 2.0, "max": 7}},
        "shards": [3, 4],
        "extra": [],
    }  # None fields are left out
    assert from_json(Outer, json.loads(json.dumps(to_json(record))), "test.json") == record


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "test.json is not a JSON object"),
        ({k: v for k, v in RAW.items() if k != "shards"}, "test.json has no shards"),
        ({**RAW, "shards": [3, "4"]}, r"test.json: shards\[1\] has the wrong type \(str\)"),
        (
            {**RAW, "sizes": {"train": {"mean": 2, "max": True}}},
            r"test.json: sizes.train: max has the wrong type \(bool\)",
        ),
        ({**RAW, "note": 5}, r"test.json: note has the wrong type \(int\)"),
    ],
)
def test_a_malformed_record_is_one_error_naming_the_field(raw, message):
    with pytest.raises(RecordError, match=message):
        from_json(Outer, raw, "test.json")
