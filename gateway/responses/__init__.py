"""The OpenAI Responses API beside chat completions, sharing its request path.

    schemas     request and response models (OpenAI's names)
    items       input items normalized and stored; items <-> chat messages; output items
    to_chat     a Responses request as the internal chat request (one path, two wire formats)
    render      the `response` object: settings echoed, output, status, usage
    store       stored responses per tenant (database), input-item pages
    service     start -> complete -> store; get, delete, input items
    streaming   the Responses SSE event sequence
"""
