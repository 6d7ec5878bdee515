"""`radixgate bench load`: many streaming clients over mixed tenants and templates, two rounds, invariants checked."""
