"""RLlib notices that every run on Ray 2.60's new API stack logs whatever its configuration: dropped by exact text.

Each one's cause is inside RLlib, not in code or settings of ours (verified on Ray 2.60.0):

* ``RLModule(config=[RLModuleConfig object]) has been deprecated``: ``RLModule.__init__`` itself builds the
  deprecated ``RLModuleConfig`` for every module (``ray/rllib/core/rl_module/rl_module.py``, ``self.config =
  RLModuleConfig(...)``), so RLlib's own PPO module logs it too. No argument of ours reaches that line.
* ``You are running <Algo> on the new API stack!``: logged unconditionally by
  ``AlgorithmConfig._validate_new_api_stack_settings`` whenever the new stack is on, also when it is set
  explicitly with ``config.api_stack(...)``.

Only records whose message contains one of these texts, from the logger that emits it, are dropped; every other
RLlib warning still shows.
"""

from __future__ import annotations

import logging

KNOWN_NOTICES: tuple[tuple[str, str], ...] = (
    ("ray._common.deprecation", "`RLModule(config=[RLModuleConfig object])` has been deprecated"),
    ("ray.rllib.algorithms.algorithm_config", "on the new API stack! This is the new default behavior"),
)
"""``(logger name, text)`` of each notice."""


class _DropNotice(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def drop_known_ray_notices() -> None:
    """Install the filters (idempotent) in this process."""
    for name, text in KNOWN_NOTICES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNotice) and f.text == text for f in logger.filters):
            logger.addFilter(_DropNotice(text))
