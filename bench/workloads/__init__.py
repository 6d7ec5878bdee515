"""Bench workloads, one generator per workload shape; each also loads the shared file of its shape by path.

    trace          token-id traces of agent/RAG traffic (bench radix)
    rag            the prefix-heavy RAG workload (bench rag)
    agent          the multi-tenant agent workload (bench agent, bench policy); agent_tenants: its tenants
    chat_template  chat messages -> prompt token ids, with the model's chat template
"""
