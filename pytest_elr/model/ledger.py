"""The loss ledger: which replicas the protocol relied on may have lost acknowledged data.

KIP-966 claims "MinISR-1 tolerance to data loss unclean shutdown events" ("Motivation"); the
design notes make it precise: "Clean recovery which is possible when no more than a threshold of
`f` replicas have experienced a concurrent lossy unclean shutdown (where `f = MinISR - 1`)"
(5.1.2). The model's invariants about data promise something only within that tolerance, so the
ledger counts exactly what the seeds count:

* which shutdowns enter it depends on the recovery the profile has. The design notes count
  *lossy* ones (a power cut, a new disk): "The page cache would not be discarded if the Kafka
  process was terminated but the OS remained up" (5.1.1), so a crash loses nothing -- and their
  tolerance holds because balanced unclean recovery inspects the logs and elects the longest
  (5.3.3). KIP-966 states its goal in *unclean* shutdowns: "elect a leader without data loss or HWM
  moving backward when we only have min ISR - 1 unclean shutdowns" ("Motivation"), and an ELR
  member that registers after any unclean shutdown loses its eligibility. A profile without
  unclean recovery (Kafka as shipped, pre-ELR Kafka) therefore counts every unclean shutdown,
  crashes included (``Profile.tolerance_counts_crashes``): a crashed replica's log is intact, but
  the controller no longer knows it and elects the last known leader instead ("Delivery plan");
* only a replica the protocol relied on at that moment (leader, ISR, ELR, LastKnownELR): any other
  replica must catch up before it can be a candidate again (the Unclean Exclusion property);
* an entry is *concurrent* until the replica "has provably caught-up to the leader" (design notes
  5.1.2): it leaves the ledger once it is in an ISR that meets min ISR under a live leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LossLedger:
    """Replicas that took a lossy shutdown while relied on and have not caught up since.

    Mutation switches (``Rules``): ``crash_is_lossless`` (off: a crash enters the ledger too) and
    ``ledger_resets_on_catch_up`` (off: an entry stays for the rest of the run).
    """

    suspects: set[int] = field(default_factory=set)

    def shutdown(self, broker: int, lossy: bool, relied_on: set[int], counts_crashes: bool = False,
                 crash_is_lossless: bool = True) -> None:
        """A broker stopped uncleanly (``lossy``: its unsynced writes are gone). ``counts_crashes``:
        the profile's tolerance counts unclean shutdowns (KIP-966), not only lossy ones."""
        if (lossy or counts_crashes or not crash_is_lossless) and broker in relied_on:
            self.suspects.add(broker)

    def caught_up(self, isr: list[int], min_isr: int, leader_live: bool, resets: bool = True) -> None:
        """Members of an ISR at min ISR under a live leader hold the leader's log: they are cleared."""
        if resets and leader_live and len(isr) >= min_isr:
            self.suspects -= set(isr)

    def within(self, min_isr: int, adding: set[int] | None = None) -> bool:
        """At most ``min_isr - 1`` suspects (with ``adding`` counted as well)."""
        return len(self.suspects | (adding or set())) <= min_isr - 1
