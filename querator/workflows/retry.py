"""Retry policies of steps: pure decisions, no I/O."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pydantic import Field

from querator.model_bases import InputModel

__all__ = ["RetryDecision", "RetryPolicy"]


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a step attempt failed."""

    retry: bool
    """True: run the step again after ``delay``; False: the step failed for good."""
    delay: float = 0.0
    """Seconds to wait before the next attempt (when ``retry``)."""


class RetryPolicy(InputModel):
    """How a failing step is retried. Attempts count leases of the step's item."""

    max_attempts: int = Field(default=3, ge=0, le=65_536)
    """Attempts in total, the first included: 1 = never retry. **0 = retry FOREVER**:
    the step never gives up (compensations default to it); pick a number otherwise."""
    initial: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    """Delay in seconds before the second attempt."""
    factor: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    """Each further delay is the previous one times this."""
    max_delay: float = Field(default=60.0, ge=0, allow_inf_nan=False)
    """No delay exceeds this many seconds."""
    jitter: bool = True
    """Randomise each delay within [delay/2, delay] so retries do not stampede."""
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    """Exceptions that are retried (subclasses included)."""
    fail_on: tuple[type[BaseException], ...] = ()
    """Exceptions that fail the step at once; checked before ``retry_on``."""

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        try:
            grown = self.initial * self.factor ** max(attempt - 1, 0)
        except OverflowError:  # retrying forever: the thousands-th attempt
            grown = math.inf
        base = min(self.max_delay, grown)
        if self.jitter:
            return base / 2 + random.uniform(0, base / 2)
        return base

    def decide(self, error: BaseException, attempt: int) -> RetryDecision:
        """Retry after failed attempt ``attempt`` (1-based), or give up."""
        if isinstance(error, self.fail_on) or not isinstance(error, self.retry_on):
            return RetryDecision(retry=False)
        if self.max_attempts and attempt >= self.max_attempts:
            return RetryDecision(retry=False)
        return RetryDecision(retry=True, delay=self.delay(attempt))
