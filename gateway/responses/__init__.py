"""The OpenAI Responses API as a wire format around the one request path (gateway/generation/).

    schemas     request and response models (OpenAI's names)
    items       input items normalized and stored; items -> the chat template's messages; output items
    parse       a Responses request as the internal GenerationRequest, and how Responses names its fields
    render      the `response` object: settings echoed, output, status, usage
    store       stored responses per tenant (database), input-item pages
    service     resolve the chain -> start -> complete -> store; get, delete, input items
    streaming   the Responses SSE event sequence
"""
