"""Key-group ranges cover [0, m) with no gap or overlap, for every parallelism."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.state.keygroups import key_group, operator_for_key_group, range_for_operator


@st.composite
def m_and_p(draw: st.DrawFn) -> tuple[int, int]:
    m = draw(st.one_of(st.integers(1, 300), st.sampled_from([128, 1024, 32768])))
    p = draw(st.one_of(st.integers(1, min(m, 300)), st.just(m)))
    return m, p


@settings(max_examples=200)
@given(m_and_p())
def test_ranges_partition_the_key_groups(mp: tuple[int, int]) -> None:
    m, p = mp
    ranges = [range_for_operator(m, p, i) for i in range(p)]
    assert ranges[0].start == 0
    assert ranges[-1].end == m - 1
    for prev, nxt in zip(ranges, ranges[1:], strict=False):
        assert nxt.start == prev.end + 1  # contiguous: no gap, no overlap
    assert all(len(r) >= 1 for r in ranges)  # p <= m: nobody is left without work
    assert max(map(len, ranges)) - min(map(len, ranges)) <= 1  # balanced
    assert sum(map(len, ranges)) == m


@settings(max_examples=200)
@given(m_and_p(), st.data())
def test_operator_for_key_group_agrees_with_ranges(
    mp: tuple[int, int], data: st.DataObject
) -> None:
    m, p = mp
    kg = data.draw(st.integers(0, m - 1))
    i = operator_for_key_group(m, p, kg)
    assert 0 <= i < p
    assert kg in range_for_operator(m, p, i)


@settings(max_examples=200)
@given(st.text(max_size=40), st.integers(1, 32768))
def test_every_key_has_one_group_in_range(key: str, m: int) -> None:
    kg = key_group(key, m)
    assert 0 <= kg < m
    assert key_group(key, m) == kg
