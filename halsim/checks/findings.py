"""A finding: one problem a rule found, with the ids a person needs to act on it.

Ops are program-order ids (``"0:7"``); a command is its op id and index joined by a dot
(``"0:7.2"``). Every finding has a stable ``rule`` id, a ``category`` (``deadlock``, ``hazard``,
``lifetime``, ``semaphore``, ``limit``), a ``severity`` (``error`` or ``warning``), the ``ops``
involved and one plain sentence; ``details`` holds what the rule adds (buffer and byte range,
semaphore and value, …), merged into the JSON form.

>>> f = Finding("hazard.raw", "error", ["0:1.0", "0:0.0"], "dispatch 0:1.0 reads ...",
...             {"buffer": "b0", "range": [0, 16]})
>>> f.category, f.to_json()["range"]
('hazard', [0, 16])
"""

from __future__ import annotations

from dataclasses import dataclass, field

CATEGORIES = ("deadlock", "hazard", "lifetime", "semaphore", "limit")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    ops: list
    message: str
    details: dict = field(default_factory=dict)

    @property
    def category(self) -> str:
        return self.rule.split(".", 1)[0]

    def to_json(self) -> dict:
        out = {"rule": self.rule, "category": self.category, "severity": self.severity,
               "ops": list(self.ops), "message": self.message}
        out.update(self.details)
        return out

    def sort_key(self) -> tuple:
        return (CATEGORIES.index(self.category) if self.category in CATEGORIES else 99, self.rule,
                self.message)


def cmd_id(op: str, index: int) -> str:
    """``"0:7"``, 2 → ``"0:7.2"``."""
    return f"{op}.{index}"


def span(start: int, end: int) -> str:
    """A byte range as the messages write it: ``[0:4096)``."""
    return f"[{start}:{end})"
