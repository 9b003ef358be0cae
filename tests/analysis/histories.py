"""Hand-built histories: small event lists written by tests, with t increasing by line."""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


class History:
    """Builds events.jsonl content; every added event gets the next t (0.1 s apart)."""

    def __init__(self) -> None:
        self.events: list[Event | str] = []
        self.t = 0.0

    def add(self, type_: str, step: str | None = "T1", **fields: Any) -> History:
        self.t = round(self.t + 0.1, 3)
        self.events.append({"t": self.t, "type": type_, "step": step, **fields})
        return self

    def raw(self, line: str) -> History:
        """A line as is (malformed histories)."""
        self.events.append(line)
        return self

    def send(self, id_: int, offset: int | None, acks: str = "all", op: str = "ok",
             value: str | None = None, partition: int = 0) -> History:
        value = value or f"v{id_}"
        self.add("produce", op="invoke", id=id_, value=value, acks=acks, partition=partition,
                 offset=None, error=None)
        return self.add("produce", op=op, id=id_, value=value, acks=acks, partition=partition,
                        offset=offset, error=None if op == "ok" else "NOT_ENOUGH_REPLICAS")

    def read(self, offset: int, value: str, reader: str = "drain", partition: int = 0) -> History:
        return self.add("consume", step="T9", partition=partition, offset=offset, value=value,
                        reader=reader)

    def observe(self, leader: int | None, isr: list[int], hwm: int | None) -> History:
        return self.add("observe", leader=leader, leader_epoch=1, isr=isr, elr=[],
                        last_known_elr=[], fenced=[], hwm=hwm, leo={"1": hwm or 0})

    def fault(self, action: str, **args: Any) -> History:
        return self.add("fault", action=action, args=args)

    def at(self, t: float) -> History:
        """Jump the clock: the next event comes at ``t`` + 0.1."""
        self.t = t
        return self


def clean(n: int = 5) -> History:
    """n acks=all records at offsets 0..n-1, all read back in order."""
    h = History().add("step", step="T0", phase="begin")
    for i in range(n):
        h.send(i, i)
    for i in range(n):
        h.read(i, f"v{i}")
    return h
