"""OpenAI chat completions as a wire format around the one request path (gateway/generation/).

    schemas    the wire models (request, response, chunks, usage)
    parse      a request body as the internal GenerationRequest, and how chat names its fields
    render     the internal Answer as a `chat.completion`
    streaming  the Answer's events as Server-Sent Events, as OpenAI sends them
"""
