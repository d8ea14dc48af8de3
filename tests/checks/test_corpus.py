"""The corpus: every schedule in corpus/ yields exactly the rule ids it declares in ``expect``."""

import os

import pytest

from halsim.checks import RULES, check_trace
from halsim.checks.cli import load_target
from halsim.schedule import load_schedule
from reference import hal

CORPUS = os.path.join(os.path.dirname(__file__), "corpus")
FILES = sorted(f for f in os.listdir(CORPUS) if f.endswith((".toml", ".json")))


def _rules(path):
    schedule = load_schedule(path)
    try:
        hal.create_device(schedule.device, **schedule.options).close()
    except hal.HalError as e:
        pytest.skip(f"{schedule.device} unavailable here: {e}")
    trace, _notes, extra = load_target(path, None)
    return schedule, sorted({f.rule for f in check_trace(trace).findings + extra})


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_yields_exactly_its_expected_rules(name):
    schedule, rules = _rules(os.path.join(CORPUS, name))
    assert rules == sorted(set(schedule.expect)), schedule.description


def test_corpus_is_large_and_named_after_its_bugs():
    assert len(FILES) >= 30
    for name in FILES:
        s = load_schedule(os.path.join(CORPUS, name))
        assert s.description
        assert name.startswith("clean_") == (s.expect == []), name


def test_every_rule_has_a_buggy_and_a_clean_case():
    expected = set()
    for name in FILES:
        expected |= set(load_schedule(os.path.join(CORPUS, name)).expect)
    assert expected == set(RULES)
    assert sum(name.startswith("clean_") for name in FILES) >= 12


def test_classic_messages_are_exact():
    def messages(name):
        trace, _n, extra = load_target(os.path.join(CORPUS, name), None)
        return [f.message for f in check_trace(trace).findings + extra]

    assert messages("raw_missing_barrier_between_dispatches.toml") == [
        "dispatch 0:0.1 reads buffer b1[0:256) written by dispatch 0:0.0 in the same command buffer "
        "with no execution barrier between them (RAW)"]
    assert messages("raw_cross_queue_without_semaphore.toml") == [
        "copy 0:1.0 reads buffer b0[0:4096) written by fill 0:0.0 on queue 0 with no semaphore or "
        "barrier ordering them (RAW)"]
    assert messages("dealloca_racing_copy.toml") == [
        "dealloca 0:2 of buffer b1 is not ordered after copy 0:1.0, which uses it: add a wait for what "
        "that op signals"]
    assert messages("metal_resources_released_early.toml") == [
        "the host released b0 while copy 0:0 that uses it was still in flight, and the device did not "
        "retain it (retain_resources=False?)"]
    assert messages("deadlock_semaphore_cycle.toml") == [
        "semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0"]
    assert messages("deadlock_same_queue_wait_before_signal.toml") == [
        "same-queue wait-before-signal on in-order queue 0: 0:0 waits s0>=1, signaled by 0:1; "
        "0:1 is queued behind 0:0 on in-order queue 0"]
