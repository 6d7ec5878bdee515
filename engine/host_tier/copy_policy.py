"""CopyPolicy: load a host-tier prefix or recompute it, whichever measures cheaper for its size.

Both costs are measured as the engine runs, never assumed: copy_s_per_page
from every host->device load (seconds per page, exponential moving average),
prefill_s_per_token from the engine's prefill forwards. A load of n pages is
chosen when n * copy_s_per_page < n * page_size * prefill_s_per_token, i.e.
per page count, with both figures taken at that count's scale (per page
overhead included). Until both are measured the policy loads: the first
loads are what measure the copy.
"""

from __future__ import annotations

EMA = 0.2  # weight of the newest sample


class CopyPolicy:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.copy_s_per_page: float | None = None
        self.prefill_s_per_token: float | None = None
        self.num_loads_chosen = 0
        self.num_recomputes_chosen = 0

    @staticmethod
    def _mix(old: float | None, new: float) -> float:
        return new if old is None else (1 - EMA) * old + EMA * new

    def observe_copy(self, num_pages: int, seconds: float) -> None:
        if num_pages > 0:
            self.copy_s_per_page = self._mix(self.copy_s_per_page, seconds / num_pages)

    def observe_prefill(self, num_tokens: int, seconds: float) -> None:
        if num_tokens > 0:
            self.prefill_s_per_token = self._mix(self.prefill_s_per_token, seconds / num_tokens)

    def should_load(self, num_pages: int) -> bool:
        if self.copy_s_per_page is None or self.prefill_s_per_token is None:
            is_load = True
        else:
            is_load = num_pages * self.copy_s_per_page < num_pages * self.page_size * self.prefill_s_per_token
        if is_load:
            self.num_loads_chosen += 1
        else:
            self.num_recomputes_chosen += 1
        return is_load

    def stats(self) -> dict:
        return {
            "copy_s_per_page": self.copy_s_per_page,
            "prefill_s_per_token": self.prefill_s_per_token,
            "loads_chosen": self.num_loads_chosen,
            "recomputes_chosen": self.num_recomputes_chosen,
        }
