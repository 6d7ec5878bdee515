"""Per-tenant concurrency limits: non-blocking acquire, release, defaults."""

from __future__ import annotations

import pytest

from gateway.tenants.limits import TenantLimits


def test_try_acquire_refuses_past_the_tenants_limit_and_release_frees_a_slot():
    limits = TenantLimits(default_limit=8)
    assert limits.try_acquire(1, 2) and limits.try_acquire(1, 2)
    assert not limits.try_acquire(1, 2)
    assert limits.try_acquire(2, 2)  # other tenants are unaffected
    limits.release(1)
    assert limits.num_active(1) == 1 and limits.try_acquire(1, 2)


def test_unset_limit_uses_the_default():
    limits = TenantLimits(default_limit=1)
    assert limits.try_acquire(1, None) and not limits.try_acquire(1, 0)


def test_release_without_acquire_raises():
    with pytest.raises(RuntimeError):
        TenantLimits(1).release(7)
