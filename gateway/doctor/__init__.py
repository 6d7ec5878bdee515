"""The cache doctor: why a tenant's requests miss the prefix cache, ranked, with fixes and their worth.

    diagnosis   `diagnose(session, tenant_id, since, until)`: the ranked causes of lost hits and the
                speedup of fixing each, from the measured counterfactuals in the request log
    fixes       each cause's title, counterfactual, evidence and fix text, in the tenant's numbers

The SQL it reads (the counterfactual sums and their hourly roll-up) is persistence and lives in
gateway.db (doctor_queries, doctor_hourly); this room imports gateway.db and nothing else of the
gateway, so the dashboard may read a diagnosis directly.
"""
