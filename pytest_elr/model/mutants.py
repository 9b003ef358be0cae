"""Mutants of the oracle: each switches one rule of the model off.

The suite must notice every one; ``elr mutants`` (:mod:`pytest_elr.schedule.mutants`) checks that.
"""

from __future__ import annotations

from pytest_elr.model.profiles import Rules

MUTANTS: dict[str, Rules] = {
    "elr-not-cleared-at-min-isr": Rules(clear_elr_at_min_isr=False),
    "hwm-advances-under-min-isr": Rules(hwm_requires_min_isr=False),
    "unclean-broker-kept-in-elr": Rules(drop_unclean_from_elr=False),
    "fenced-elr-member-elected": Rules(elect_only_unfenced=False),
    "stale-broker-epoch-accepted": Rules(check_broker_epoch=False),
    "min-isr-not-capped-at-rf": Rules(cap_min_isr_at_rf=False),
}
