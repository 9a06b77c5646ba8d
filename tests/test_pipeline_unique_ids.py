"""conversation_id is unique in a table the pipeline resolves (one decision per
conversation): check_unique_conversations counts the rows and the distinct hashes of the
ids first, and names the duplicates only when the counts differ. Generated tables of ids,
with and without copies, on DuckDB; test_pipeline_spark.py runs the same check on Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.apps.pipeline.engine import DuckDBEngine
from tests.pipeline_fixtures import DUPLICATED_IDS, expected_refusal, refusal

IDS = st.lists(st.text(min_size=1, max_size=6), min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(ids=IDS, copied=st.lists(st.integers(0, 39), max_size=12))
def test_duplicates_are_named_exactly_and_unique_ids_pass(ids, copied):
    ids = ids + [ids[i % len(ids)] for i in copied] if ids else ids
    with DuckDBEngine() as duck:
        assert refusal(duck, ids) == expected_refusal(ids)
        # the first check's counts themselves (DuckDB counts the distinct hashes of the
        # sorted hashes): equal exactly when no id is copied (no two of these short ids
        # share a 64-bit hash)
        _, [(rows, distinct_hashes)] = duck.fetch("conversations_id_counts")
        assert (rows, distinct_hashes) == (len(ids), len(set(ids)))


@pytest.mark.parametrize("ids", [
    [f"{n:08d}-0000-4000-8000-000000000000" for n in range(5000)],
    DUPLICATED_IDS,
])
def test_many_ids_and_more_than_five_duplicates(ids):
    with DuckDBEngine() as duck:
        assert refusal(duck, ids) == expected_refusal(ids)
