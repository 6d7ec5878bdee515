"""The chat request path, in the order a request meets it.

    schemas    the OpenAI wire format (request, response, chunks, usage)
    models     which served model a request's `model` names
    prepare    canonicalize -> render -> tokenize, for one tenant
    service    start_chat (admit, prepare, shadow, route, first output), complete, stream_events
    run        ChatRun: the request's lifecycle, the tenant slot taken and released
    streaming  Server-Sent Events as OpenAI sends them
    tool_calls tool calls parsed out of the generated text
    record     what a finished run leaves: the request-log row, metrics, one INFO line
"""
